package dev.edgem3

import androidx.test.ext.junit.runners.AndroidJUnit4
import androidx.test.platform.app.InstrumentationRegistry
import org.junit.Assert.assertEquals
import org.junit.Assert.assertTrue
import org.junit.Test
import org.junit.runner.RunWith

/**
 * Instrumented template: checks this app against the bundle's golden.json on a real device.
 *
 * Run with `./gradlew connectedAndroidTest`. Exact checks: token ids from the kit's own
 * tokenizer (of the bundle's kind), signature choice, post-processing of the recorded raw outputs. Tolerant check:
 * the live model outputs on this device's CPU against the recorded ones, within the variant's
 * device tolerance (EdgeM3Contract.TOLERANCES).
 */
@RunWith(AndroidJUnit4::class)
class EdgeM3GoldenTest {
    private val context = InstrumentationRegistry.getInstrumentation().targetContext
    // golden.json lives in the test APK's own assets (src/androidTest/assets), not in the app.
    private val testContext = InstrumentationRegistry.getInstrumentation().context
    private val dir = EdgeM3Embedder.ASSET_DIR
    private val manifest = Manifest.fromJson(EdgeM3Embedder.readJsonAsset(context.assets, "$dir/${EdgeM3Contract.MANIFEST}"))
    private val model = manifest.model("tflite")
    private val golden = Golden.parse(EdgeM3Embedder.readJsonAsset(testContext.assets, "$dir/${EdgeM3Contract.GOLDEN}"))
    private val tokenizer = EdgeM3Tokenizer.open(manifest.tokenizer) { name ->
        context.assets.open("$dir/$name").use { it.readBytes() }
    }
    private val vocab = tokenizer.vocab

    @Test
    fun goldenMatchesThisBundle() {
        assertEquals("golden.json model_file", model.file, golden.modelFile)
        assertTrue("golden.json has no cases", golden.cases.isNotEmpty())
    }

    @Test
    fun tokensAndSignatureMatchGolden() {
        for (case in golden.cases) {
            val e = EdgeM3Core.encode(case.text, tokenizer, model.signatures)
            assertEquals("input_ids of: ${case.text}", case.expected.inputIds.toList(), e.inputIds.toList())
            assertEquals("signature of: ${case.text}", case.expected.signature, e.signature.name)
            assertEquals("seq_len of: ${case.text}", case.expected.seqLen, e.signature.seqLen)
        }
    }

    @Test
    fun postprocessingOfRecordedOutputsIsExact() {
        for (case in golden.cases) {
            val enc = Encoded(case.expected.inputIds, model.signature(case.expected.signature))
            val got = EdgeM3Core.postprocess(case.raw, enc, manifest.tokenizer.special, vocab)
            val problems = Golden.compareExact(got, case.expected)
            assertTrue("${case.text}: $problems", problems.isEmpty())
        }
    }

    @Test
    fun liveOutputsWithinTolerance() {
        val tol = Golden.toleranceFor(manifest.quant)
        EdgeM3Embedder.fromAssets(context).use { embedder ->
            for (case in golden.cases) {
                val got = embedder.embedIdsBlocking(case.expected.inputIds)
                val problems = Golden.compareWithin(got, case.expected, tol)
                assertTrue("${case.text}: $problems", problems.isEmpty())
            }
        }
    }
}
