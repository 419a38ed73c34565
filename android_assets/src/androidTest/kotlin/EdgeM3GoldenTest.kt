// Instrumented-test template: the app's pipeline against the bundled golden.json.
// Copy into app/src/androidTest/..., provide your PieceEncoder (SentencePiece binding).
import androidx.test.platform.app.InstrumentationRegistry
import edge_m3.EdgeM3Embedder
import edge_m3.PieceEncoder
import org.json.JSONObject
import org.junit.Assert.assertArrayEquals
import org.junit.Assert.assertEquals
import org.junit.Assert.assertTrue
import org.junit.Test

class EdgeM3GoldenTest {
    private val encoder: PieceEncoder = TODO("your SentencePiece binding over edge_m3/sentencepiece.bpe.model")

    @Test
    fun reproducesGolden() {
        val ctx = InstrumentationRegistry.getInstrumentation().targetContext
        val golden = JSONObject(EdgeM3Embedder.readAsset(ctx, "edge_m3/golden.json"))
        val cases = golden.getJSONArray("cases")
        EdgeM3Embedder(ctx, encoder, threads = 2).use { embedder ->
            for (i in 0 until cases.length()) {
                val c = cases.getJSONObject(i)
                val out = embedder.embed(c.getString("text"))
                val ids = c.getJSONArray("input_ids")
                assertArrayEquals(IntArray(ids.length()) { ids.getInt(it) }, out.inputIds)
                assertEquals(c.getString("signature"), out.signature)
                val dense = c.getJSONArray("dense_vecs")
                var dot = 0.0
                for (j in 0 until dense.length()) dot += dense.getDouble(j) * out.denseVecs[j]
                assertTrue("dense cosine $dot on case $i", dot > 0.999)  // both are unit vectors
                assertEquals(c.getJSONObject("lexical_weights").length(), out.lexicalWeights.size)
            }
        }
    }
}
