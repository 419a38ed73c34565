// Android side of the edge-m3 pipeline: assets, memory-mapped model, signature runner.
// Platform-independent steps live in EdgeM3Core.kt (compiled and checked on the JVM in CI).
package edge_m3

import android.content.Context
import org.json.JSONArray
import org.json.JSONObject
import org.tensorflow.lite.Interpreter
import java.io.FileInputStream
import java.nio.MappedByteBuffer
import java.nio.channels.FileChannel

/** Anything that turns text into the reference's piece ids (SentencePiece ids, step 1). */
interface PieceEncoder {
    fun encodeAsIds(text: String): IntArray
}

class Embedding(
    val inputIds: IntArray,
    val signature: String,
    val denseVecs: FloatArray,
    val lexicalWeights: Map<String, Float>,
    val colbertVecs: Array<FloatArray>,
)

/**
 * One interpreter per instance; Interpreter is not thread-safe, so use one EdgeM3Embedder per
 * worker thread (weights are memory-mapped once by the OS and shared).
 */
class EdgeM3Embedder(context: Context, private val encoder: PieceEncoder, threads: Int = 2,
                     assetDir: String = "edge_m3") : AutoCloseable {
    val manifest: Manifest
    private val interpreter: Interpreter

    init {
        val root = jsonToMap(JSONObject(readAsset(context, "$assetDir/manifest.json")))
        @Suppress("UNCHECKED_CAST")
        val vocab = (root["tokenizer"] as Map<String, Any?>)["vocab_map"] as Map<String, Any?>?
        val kept = vocab?.let { vm ->
            val m = JSONObject(readAsset(context, "$assetDir/${vm["file"]}"))
            val arr = m.getJSONArray("kept_ids")
            IntArray(arr.length()) { arr.getInt(it) }
        }
        manifest = Manifest.fromJson(root, "tflite", kept)
        @Suppress("UNCHECKED_CAST")
        val file = ((root["models"] as List<Map<String, Any?>>).first { it["format"] == "tflite" })["file"] as String
        interpreter = Interpreter(mapAsset(context, "$assetDir/$file"), Interpreter.Options().setNumThreads(threads))
    }

    fun embed(text: String): Embedding {
        val spec = manifest.tokenizer
        val maxLen = manifest.signatures.last().seqLen
        val ids = EdgeM3Core.truncate(spec, EdgeM3Core.mapPieces(spec, encoder.encodeAsIds(text)), maxLen)
        val sig = EdgeM3Core.chooseSignature(manifest, ids.size)
        val (padded, mask) = EdgeM3Core.pad(spec, EdgeM3Core.toModelIds(spec, ids), sig.seqLen)
        val h = manifest.hiddenSize
        val dense = Array(1) { FloatArray(h) }
        val sparse = Array(1) { FloatArray(sig.seqLen) }
        val colbert = Array(1) { Array(sig.seqLen - 1) { FloatArray(h) } }
        interpreter.runSignature(
            mapOf("input_ids" to arrayOf(padded), "attention_mask" to arrayOf(mask)),
            mapOf("dense_vecs" to dense, "sparse_weights" to sparse, "colbert_vecs" to colbert),
            sig.name,
        )
        return Embedding(ids, sig.name, dense[0], EdgeM3Core.lexicalWeights(spec, ids, sparse[0]),
                         EdgeM3Core.colbertVectors(colbert[0], ids.size))
    }

    override fun close() = interpreter.close()

    companion object {
        fun readAsset(context: Context, path: String): String =
            context.assets.open(path).use { it.readBytes().toString(Charsets.UTF_8) }

        /** Needs the asset stored uncompressed (see build.gradle.kts.snippet). */
        fun mapAsset(context: Context, path: String): MappedByteBuffer {
            val fd = context.assets.openFd(path)
            FileInputStream(fd.fileDescriptor).use { stream ->
                return stream.channel.map(FileChannel.MapMode.READ_ONLY, fd.startOffset, fd.declaredLength)
            }
        }

        fun jsonToMap(o: JSONObject): Map<String, Any?> =
            o.keys().asSequence().associateWith { jsonValue(o.get(it)) }

        private fun jsonValue(v: Any?): Any? = when (v) {
            is JSONObject -> jsonToMap(v)
            is JSONArray -> (0 until v.length()).map { jsonValue(v.get(it)) }
            JSONObject.NULL -> null
            else -> v
        }
    }
}
