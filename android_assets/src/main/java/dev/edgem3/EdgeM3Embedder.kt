package dev.edgem3

import android.content.Context
import android.content.res.AssetManager
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.sync.Mutex
import kotlinx.coroutines.sync.withLock
import kotlinx.coroutines.withContext
import org.tensorflow.lite.Interpreter
import java.io.Closeable
import java.io.File
import java.io.FileInputStream
import java.io.FileNotFoundException
import java.nio.MappedByteBuffer
import java.nio.channels.FileChannel

// Android side of the kit: the bundle from assets/edge_m3/, the .tflite memory-mapped, one
// Interpreter, the kit's own XlmrTokenizer (the reference's ids, no NDK). The pipeline itself is
// EdgeM3Core; names and tolerances come from EdgeM3Contract (generated from edge_m3/contract.py).

/**
 * BGE-M3 embeddings on Android: `embed(text)` gives FlagEmbedding's dense_vecs, lexical_weights
 * and colbert_vecs (whichever heads the bundle exports).
 *
 * One instance holds one Interpreter (a few hundred MB of mapped weights plus per-signature
 * arenas). Interpreters are not thread-safe: the suspending `embed` takes turns on a [Mutex]
 * (waiting callers suspend) and runs on [Dispatchers.Default]; the blocking `embedBlocking` is
 * `@Synchronized` (waiting callers block). For parallel throughput create one embedder per
 * worker; they share the mapped model pages, only the arenas are per instance.
 */
class EdgeM3Embedder(
    val manifest: Manifest,
    val model: ModelEntry,
    private val interpreter: Interpreter,
    val tokenizer: XlmrTokenizer
) : Closeable {
    private val runner = TfliteRunner(interpreter)
    private val turns = Mutex()
    private var closed = false

    init {
        val keys = interpreter.signatureKeys.toSet()
        for (s in model.signatures) {
            if (!keys.contains(s.name)) throw EdgeM3Exception("${model.file}: no signature ${s.name} (has $keys)")
        }
    }

    /** Steps 1-5 of docs/bundle-format.md for one text; main-safe (the model runs on Dispatchers.Default). */
    suspend fun embed(text: String): Embedding =
        turns.withLock { withContext(Dispatchers.Default) { embedBlocking(text) } }

    /** Steps 3-5 for ids that are already tokenized and truncated; main-safe. */
    suspend fun embedIds(inputIds: IntArray): Embedding =
        turns.withLock { withContext(Dispatchers.Default) { embedIdsBlocking(inputIds) } }

    /** `embed` on the calling thread (never the main one): for Java callers and worker threads. */
    @Synchronized
    fun embedBlocking(text: String): Embedding {
        check(!closed) { "EdgeM3Embedder is closed" }
        return EdgeM3Core.embed(text, manifest, model, tokenizer, runner)
    }

    /** `embedIds` on the calling thread (the golden test's entry point). */
    @Synchronized
    fun embedIdsBlocking(inputIds: IntArray): Embedding {
        check(!closed) { "EdgeM3Embedder is closed" }
        return EdgeM3Core.run(Encoded(inputIds, EdgeM3Core.chooseSignature(inputIds.size, model.signatures)),
            manifest, runner, tokenizer.vocab)
    }

    @Synchronized
    override fun close() {
        if (!closed) interpreter.close()
        closed = true
    }

    companion object {
        /** Where `make build` (edge_m3.bundle.copy_to_kits) puts the bundle: src/main/assets/edge_m3/. */
        const val ASSET_DIR = EdgeM3Contract.ASSET_DIR

        /** CPU options: XNNPACK on, `threads` intra-op threads (2-4 suits big.LITTLE phones). */
        fun defaultOptions(threads: Int): Interpreter.Options =
            Interpreter.Options().setNumThreads(threads).setUseXNNPACK(true)

        /**
         * Loads manifest.json from assets/`dir`, maps the .tflite (no copy: the OS pages weights in
         * on demand), checks it against the manifest (size; SHA-256 on the first load of this APK,
         * remembered in noBackupFilesDir), loads the tokenizer from sentencepiece.bpe.model (and
         * vocab_map.json for trimmed bundles). Blocking: call it off the main thread, or use [load].
         */
        fun fromAssets(
            context: Context,
            options: Interpreter.Options = defaultOptions(2),
            dir: String = ASSET_DIR
        ): EdgeM3Embedder {
            val assets = context.assets
            val manifest = Manifest.fromJson(readJsonAsset(assets, "$dir/${EdgeM3Contract.MANIFEST}"))
            val model = manifest.model("tflite")
            val vocabFile = manifest.tokenizer.vocabMapFile
            val vocab = if (vocabFile == null) null else
                VocabMap.fromJson(readJsonAsset(assets, "$dir/$vocabFile"), manifest.tokenizer)
            val spBytes = assets.open("$dir/${manifest.tokenizer.file}").use { it.readBytes() }
            val tokenizer = XlmrTokenizer(spBytes, manifest.tokenizer, vocab)
            val path = "$dir/${model.file}"
            val buffer = mapAsset(assets, path)
            val expected = manifest.files[model.file]
            if (expected != null) {
                // An app update replaces the APK (new mtime): its model is hashed again once.
                ModelCheck.verify("assets/$path", expected, buffer.capacity().toLong(),
                    File(context.packageCodePath).lastModified(), File(context.noBackupFilesDir, ASSET_DIR)) {
                    assets.open(path)
                }
            }
            return EdgeM3Embedder(manifest, model, Interpreter(buffer, options), tokenizer)
        }

        /** [fromAssets] on Dispatchers.IO: main-safe (hashing a 568 MB model takes about a second). */
        suspend fun load(
            context: Context,
            options: Interpreter.Options = defaultOptions(2),
            dir: String = ASSET_DIR
        ): EdgeM3Embedder = withContext(Dispatchers.IO) { fromAssets(context, options, dir) }

        /**
         * The same from a directory on disk: a fast-follow / on-demand Play Asset Delivery pack
         * (`AssetPackManager.getPackLocation(pack)!!.assetsPath()` + "/edge_m3"), or a download.
         * The first load's checksum success is remembered in `checksumMemo` (null: hash every load).
         */
        fun fromDirectory(
            dir: File,
            options: Interpreter.Options = defaultOptions(2),
            checksumMemo: File? = dir
        ): EdgeM3Embedder {
            val manifest = Manifest.fromJson(readJsonFile(File(dir, EdgeM3Contract.MANIFEST)))
            val model = manifest.model("tflite")
            val vocabFile = manifest.tokenizer.vocabMapFile
            val vocab = if (vocabFile == null) null else
                VocabMap.fromJson(readJsonFile(File(dir, vocabFile)), manifest.tokenizer)
            val spFile = File(dir, manifest.tokenizer.file)
            if (!spFile.isFile) throw EdgeM3Exception("$spFile: not found")
            val tokenizer = XlmrTokenizer(spFile.readBytes(), manifest.tokenizer, vocab)
            val file = File(dir, model.file)
            val expected = manifest.files[model.file]
            if (expected != null) {
                ModelCheck.verify(file.path, expected, file.length(), file.lastModified(), checksumMemo) {
                    FileInputStream(file)
                }
            }
            val buffer = FileInputStream(file).use { stream ->
                stream.channel.map(FileChannel.MapMode.READ_ONLY, 0, stream.channel.size())
            }
            return EdgeM3Embedder(manifest, model, Interpreter(buffer, options), tokenizer)
        }

        /** [fromDirectory] on Dispatchers.IO: main-safe. */
        suspend fun load(
            dir: File,
            options: Interpreter.Options = defaultOptions(2),
            checksumMemo: File? = dir
        ): EdgeM3Embedder = withContext(Dispatchers.IO) { fromDirectory(dir, options, checksumMemo) }

        fun readJsonFile(file: File): Any? {
            if (!file.isFile) throw EdgeM3Exception("$file: not found")
            return MiniJson.parse(file.readText(Charsets.UTF_8))
        }

        fun readJsonAsset(assets: AssetManager, path: String): Any? =
            MiniJson.parse(assets.open(path).use { it.readBytes().toString(Charsets.UTF_8) })

        /** Memory-maps an asset; it must be stored uncompressed (noCompress "tflite", see README). */
        fun mapAsset(assets: AssetManager, path: String): MappedByteBuffer {
            val afd = try {
                assets.openFd(path)
            } catch (exc: FileNotFoundException) {
                throw EdgeM3Exception("assets/$path: cannot be memory-mapped (missing, or compressed in the " +
                    "APK: add androidResources { noCompress += listOf(\"tflite\") })")
            }
            afd.use {
                FileInputStream(it.fileDescriptor).use { stream ->
                    // The mapping stays valid after the stream closes.
                    return stream.channel.map(FileChannel.MapMode.READ_ONLY, it.startOffset, it.declaredLength)
                }
            }
        }
    }
}

/** A TFLite / LiteRT Interpreter as a ModelRunner: int32 `[1, L]` in, float32 arrays out. */
class TfliteRunner(private val interpreter: Interpreter) : ModelRunner {
    override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
        val inputs = HashMap<String, Any>()
        inputs[EdgeM3Contract.INPUT_IDS] = arrayOf(inputIds)
        inputs[EdgeM3Contract.ATTENTION_MASK] = arrayOf(attentionMask)
        val outputs = HashMap<String, Any>()
        // Shapes come from the manifest: [1, H], [1, L], [1, L-1, H]; absent heads stay null.
        val dense = signature.output(EdgeM3Contract.DENSE_VECS)?.let { t -> Array(t.shape[0]) { FloatArray(t.shape[1]) } }
        val sparse = signature.output(EdgeM3Contract.SPARSE_WEIGHTS)?.let { t -> Array(t.shape[0]) { FloatArray(t.shape[1]) } }
        val colbert = signature.output(EdgeM3Contract.COLBERT_VECS)?.let { t ->
            Array(t.shape[0]) { Array(t.shape[1]) { FloatArray(t.shape[2]) } }
        }
        if (dense != null) outputs[EdgeM3Contract.DENSE_VECS] = dense
        if (sparse != null) outputs[EdgeM3Contract.SPARSE_WEIGHTS] = sparse
        if (colbert != null) outputs[EdgeM3Contract.COLBERT_VECS] = colbert
        interpreter.runSignature(inputs, outputs, signature.name)
        return RawOutputs(dense, sparse, colbert)
    }
}
