package dev.edgem3

import androidx.test.ext.junit.runners.AndroidJUnit4
import androidx.test.platform.app.InstrumentationRegistry
import org.junit.Assert.assertEquals
import org.junit.Assert.assertTrue
import org.junit.Assume.assumeTrue
import org.junit.Test
import org.junit.runner.RunWith

/**
 * Instrumented template: checks this app against the bundle's golden.json on a real device.
 *
 * Run with `./gradlew connectedAndroidTest`. Exact checks: token ids (needs your SentencePiece
 * binding, see `encoder`), signature choice, post-processing of the recorded raw outputs.
 * Tolerant check: the live model outputs on this device's CPU against the recorded ones.
 */
@RunWith(AndroidJUnit4::class)
class EdgeM3GoldenTest {
    private val context = InstrumentationRegistry.getInstrumentation().targetContext
    // golden.json lives in the test APK's own assets (src/androidTest/assets), not in the app.
    private val testContext = InstrumentationRegistry.getInstrumentation().context
    private val dir = EdgeM3Embedder.ASSET_DIR
    private val manifest = Manifest.fromJson(EdgeM3Embedder.readJsonAsset(context.assets, "$dir/manifest.json"))
    private val model = manifest.model("tflite")
    private val golden = EdgeM3Core.parseGolden(EdgeM3Embedder.readJsonAsset(testContext.assets, "$dir/golden.json"))
    private val vocab = manifest.tokenizer.vocabMapFile?.let {
        VocabMap.fromJson(EdgeM3Embedder.readJsonAsset(context.assets, "$dir/$it"), manifest.tokenizer)
    }

    /** Plug the app's SentencePiece binding in here (README: "SentencePiece"); null skips the token test. */
    private val encoder: PieceEncoder? = null

    @Test
    fun goldenMatchesThisBundle() {
        assertEquals("golden.json model_file", model.file, golden.modelFile)
        assertTrue("golden.json has no cases", golden.cases.isNotEmpty())
    }

    @Test
    fun tokensAndSignatureMatchGolden() {
        val enc = encoder
        assumeTrue("no SentencePiece binding plugged into EdgeM3GoldenTest.encoder", enc != null)
        for (case in golden.cases) {
            val e = EdgeM3Core.encode(enc!!.encodeAsIds(case.text), manifest.tokenizer, model.signatures)
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
            val problems = EdgeM3Core.compareExact(got, case.expected)
            assertTrue("${case.text}: $problems", problems.isEmpty())
        }
    }

    @Test
    fun liveOutputsWithinTolerance() {
        // The recorded ids go straight to the model, so this runs without a SentencePiece binding.
        val noTokenizer = object : PieceEncoder {
            override fun encodeAsIds(text: String): IntArray = throw IllegalStateException("not used")
        }
        val tol = EdgeM3Core.toleranceFor(manifest.quant)
        EdgeM3Embedder.fromAssets(context, noTokenizer).use { embedder ->
            for (case in golden.cases) {
                val got = embedder.embedIdsBlocking(case.expected.inputIds)
                val problems = EdgeM3Core.compareWithin(got, case.expected, tol)
                assertTrue("${case.text}: $problems", problems.isEmpty())
            }
        }
    }
}
