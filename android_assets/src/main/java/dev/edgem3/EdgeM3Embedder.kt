package dev.edgem3

import android.content.Context
import android.content.res.AssetFileDescriptor
import android.content.res.AssetManager
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.ensureActive
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.sync.Mutex
import kotlinx.coroutines.sync.withLock
import kotlinx.coroutines.withContext
import java.io.Closeable
import java.io.File
import java.io.FileInputStream
import java.io.FileNotFoundException
import java.io.FileOutputStream
import java.nio.MappedByteBuffer
import java.nio.channels.FileChannel
import java.security.DigestInputStream
import java.security.MessageDigest
import java.util.concurrent.locks.ReentrantLock
import kotlin.coroutines.CoroutineContext

// Android side of the kit: the bundle from assets/edge_m3/ or a folder, the .tflite on LiteRT
// (ModelRunners.kt: CompiledModel with an XNNPACK weight cache), the kit's own tokenizer of the
// bundle's kind (EdgeM3Tokenizer: the reference's ids, no NDK). The pipeline itself is EdgeM3Core;
// names and tolerances come from EdgeM3Contract (generated from edge_m3/spec/).

/** How [EdgeM3Embedder.fromAssets] opens the model asset on `CompiledModel` (with a weight cache). */
enum class ModelCopy {
    /** Copied out of the APK once, into noBackupFilesDir, then mapped: the file once more on disk. */
    FILE,

    /** `CompiledModel.create(assets, path)`: LiteRT copies the asset into native memory, the file's size more RAM. */
    MEMORY
}

/**
 * Text embeddings on Android (BGE-M3, or a BERT such as all-MiniLM-L6-v2): `embed(text)` gives
 * FlagEmbedding's dense_vecs, lexical_weights and colbert_vecs (whichever heads the bundle exports);
 * `embed(texts)` a batch, equal bit for bit to the texts embedded one by one.
 *
 * One instance holds one opened model (the mapped file, its packed weights once with a weight
 * cache, per-signature arenas). Runtimes are not thread-safe: the suspending `embed` takes turns
 * on a [Mutex] (waiting callers suspend) and runs on [Dispatchers.Default]; the blocking
 * `embedBlocking` takes turns on a lock (waiting callers block). For parallel throughput create one
 * embedder per worker; with a weight cache file they share the mapped packed weights.
 *
 * Cancellation is checked before each model call: a cancelled coroutine (or an interrupted thread,
 * for the blocking calls) stops a batch before its next text with [EdgeM3CancelledException], a
 * `CancellationException`. [close] returns at once, also while an embed runs: the model is
 * released when the running model call returns, and every later call fails with
 * [EdgeM3ClosedException].
 */
class EdgeM3Embedder(
    val manifest: Manifest,
    val model: ModelEntry,
    private val runner: LoadedModel,
    val tokenizer: EdgeM3Tokenizer
) : Closeable {
    private val turns = Mutex()
    private val runLock = ReentrantLock()  // one caller's texts at a time on the model
    private val state = Any()  // guards the three flags below; held only to read or flip them
    private var closed = false
    private var running = false  // a model call is under way
    private var released = false

    /** True once [close] was called (the model may still be finishing the call under way). */
    val isClosed: Boolean get() = synchronized(state) { closed }

    /** Steps 1-5 of docs/bundle-format.md for one text; main-safe (the model runs on Dispatchers.Default). */
    suspend fun embed(text: String): Embedding = embed(listOf(text))[0]

    /**
     * Steps 1-5 for each text, in order, in one turn on the model; main-safe. The coroutine's
     * cancellation is checked before each model call: cancelled, the batch stops there with
     * [EdgeM3CancelledException] (a `CancellationException`, so the coroutine ends as cancelled).
     */
    suspend fun embed(texts: List<String>): List<Embedding> =
        turns.withLock {
            withContext(Dispatchers.Default) {
                batch(texts, whenCancelled(coroutineContext, texts.size))
            }
        }

    /** Steps 3-5 for ids that are already tokenized and truncated; main-safe. */
    suspend fun embedIds(inputIds: IntArray): Embedding =
        turns.withLock {
            withContext(Dispatchers.Default) {
                val check = whenCancelled(coroutineContext, 1)
                ids(inputIds) { check(0) }
            }
        }

    /**
     * The text's chunks (`EdgeM3Tokenizer.encodeChunks`: windows of the largest signature that
     * overlap by `overlap` tokens, default CHUNK_OVERLAP_PERCENT of a window), each embedded as a
     * text whose ids are the chunk, in one turn on the model; main-safe. What an index stores for
     * a long passage, one row per chunk (`EdgeM3WritableIndex.add(id, text)`).
     */
    suspend fun embedChunks(text: String, overlap: Int? = null): List<Embedding> =
        turns.withLock {
            withContext(Dispatchers.Default) {
                val check = whenCancelled(coroutineContext, 1)
                chunks(text, overlap) { check(0) }
            }
        }

    /** `embedChunks` on the calling thread (never the main one); the interrupt flag checked before each chunk. */
    fun embedChunksBlocking(text: String, overlap: Int? = null): List<Embedding> = chunks(text, overlap) { interrupted(0) }

    /** `embed` on the calling thread (never the main one): for Java callers and worker threads. */
    fun embedBlocking(text: String): Embedding = embedBlocking(listOf(text))[0]

    /**
     * `embed(texts)` on the calling thread (never the main one). The thread's interrupt flag is
     * checked before each model call (`Future.cancel(true)` sets it): set, the batch stops with
     * [EdgeM3CancelledException] (the flag stays set).
     */
    fun embedBlocking(texts: List<String>): List<Embedding> = batch(texts, ::interrupted)

    /** `embedIds` on the calling thread (the golden test's entry point). */
    fun embedIdsBlocking(inputIds: IntArray): Embedding = ids(inputIds) { interrupted(0) }

    /**
     * Returns at once, even while an embed runs on another thread: the model is released now if
     * idle, else when the running model call returns (that call's text completes; the rest of its
     * batch, queued callers and every later call fail with [EdgeM3ClosedException]). Idempotent.
     */
    override fun close() {
        val now = synchronized(state) {
            if (closed) return
            closed = true
            (!running).also { if (it) released = true }
        }
        if (now) runner.close()
    }

    private fun interrupted(i: Int) {
        if (Thread.currentThread().isInterrupted) {
            throw EdgeM3CancelledException("embed cancelled (the thread was interrupted) before text ${i + 1}")
        }
    }

    /** The coroutine's cancellation as the kit's typed one (the job's CancellationException its cause). */
    private fun whenCancelled(context: CoroutineContext, n: Int): (Int) -> Unit = { i ->
        try {
            context.ensureActive()
        } catch (exc: CancellationException) {
            throw EdgeM3CancelledException("embed cancelled before text ${i + 1} of $n", exc)
        }
    }

    /** The texts one by one on the model (one turn): `check(i)` before text i's model call. */
    private fun batch(texts: List<String>, check: (Int) -> Unit): List<Embedding> {
        runLock.lock()
        try {
            val result = ArrayList<Embedding>(texts.size)
            for ((i, text) in texts.withIndex()) {
                result.add(EdgeM3Core.embed(text, manifest, model, tokenizer, Guarded { check(i) }))
            }
            return result
        } finally {
            runLock.unlock()
        }
    }

    private fun chunks(text: String, overlap: Int?, check: () -> Unit): List<Embedding> {
        val encoded = EdgeM3Core.encodeChunks(text, tokenizer, model.signatures, overlap)
        runLock.lock()
        try {
            return encoded.map { EdgeM3Core.run(it, manifest, Guarded(check), tokenizer.vocab) }
        } finally {
            runLock.unlock()
        }
    }

    private fun ids(inputIds: IntArray, check: () -> Unit): Embedding {
        runLock.lock()
        try {
            return EdgeM3Core.run(Encoded(inputIds, EdgeM3Core.chooseSignature(inputIds.size, model.signatures)),
                manifest, Guarded(check), tokenizer.vocab)
        } finally {
            runLock.unlock()
        }
    }

    /** The model behind the checks every model call makes: cancelled, closed, then the call. */
    private inner class Guarded(private val check: () -> Unit) : ModelRunner {
        override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
            check()
            synchronized(state) {
                if (closed) throw EdgeM3ClosedException("EdgeM3Embedder is closed")
                running = true
            }
            try {
                return runner.run(signature, inputIds, attentionMask)
            } finally {
                val release = synchronized(state) {
                    running = false
                    (closed && !released).also { if (it) released = true }
                }
                if (release) runner.close()  // close() was called during this call
            }
        }
    }

    companion object {
        /** Where `make build` (edge_m3.bundle.copy_to_kits) puts the bundle: src/main/assets/edge_m3/. */
        const val ASSET_DIR = EdgeM3Contract.ASSET_DIR

        /**
         * Loads manifest.json from assets/`dir`, the tokenizer of its kind (sentencepiece.bpe.model
         * and, trimmed, vocab_map.json; or vocab.txt), and the .tflite with `threads` XNNPACK threads and
         * `weightCache` (default: a file in the app's cache folder). The model asset (stored
         * uncompressed: noCompress; an install-time asset pack's assets are the app's) is opened as
         * `modelCopy` says, with a weight cache: [ModelCopy.FILE] copies it out of the APK once,
         * into noBackupFilesDir, checking its SHA-256 on the way (disk: the file once more; RAM: a
         * mapping, only the pages in use), [ModelCopy.MEMORY] hands it to LiteRT's
         * `CompiledModel.create(assets, path)`, which copies it into native memory (no disk; RAM:
         * the file's size more, for as long as the model is open). With [WeightCache.Off] the asset
         * is mapped in place (Interpreter API: no copy at all, but one packed weight copy per
         * signature). Hashed once per APK. Blocking: call it off the main thread, or use [load].
         */
        fun fromAssets(
            context: Context,
            threads: Int = EdgeM3Contract.DEVICE_THREADS,
            weightCache: WeightCache = WeightCache.inCacheDir(context),
            dir: String = ASSET_DIR,
            modelCopy: ModelCopy = ModelCopy.FILE,
            accelerator: EdgeM3Accelerator = EdgeM3Accelerator.CPU
        ): EdgeM3Embedder {
            checkOptions(threads, weightCache, accelerator)
            val assets = context.assets
            val manifest = Manifest.fromJson(readJsonAsset(assets, "$dir/${EdgeM3Contract.MANIFEST}"))
            val model = manifest.model("tflite")
            val tokenizer = EdgeM3Tokenizer.open(manifest.tokenizer) { name -> assets.open("$dir/$name").use { it.readBytes() } }
            val path = "$dir/${model.file}"
            val expected = manifest.files[model.file]
                ?: throw EdgeM3Exception("assets/$dir/${EdgeM3Contract.MANIFEST}: no files entry for ${model.file}")
            val apkStamp = File(context.packageCodePath).lastModified()
            val memo = File(context.noBackupFilesDir, ASSET_DIR)
            // An app update replaces the APK (new mtime): its model is hashed again once.
            fun verifyAsset(size: Long) = ModelCheck.verify("assets/$path", expected, size, apkStamp, memo) { assets.open(path) }
            val runner = when {
                weightCache is WeightCache.Off -> {
                    val buffer = mapAsset(assets, path)
                    verifyAsset(buffer.capacity().toLong())
                    TfliteRunner.open(buffer, model.signatures, model.file, threads)
                }
                modelCopy == ModelCopy.MEMORY -> {
                    verifyAsset(openAssetFd(assets, path).use { it.length })
                    ModelRunners.openAsset(assets, path, model.signatures, expected.sha256, threads, weightCache, accelerator)
                }
                else -> {
                    val file = extractAsset(assets, path, expected, File(memo, "models"))
                    ModelRunners.open(file, model.signatures, expected.sha256, threads, weightCache, accelerator)
                }
            }
            return EdgeM3Embedder(manifest, model, runner, tokenizer)
        }

        /** [fromAssets] on Dispatchers.IO: main-safe (the first load copies and hashes the model). */
        suspend fun load(
            context: Context,
            threads: Int = EdgeM3Contract.DEVICE_THREADS,
            weightCache: WeightCache = WeightCache.inCacheDir(context),
            dir: String = ASSET_DIR,
            modelCopy: ModelCopy = ModelCopy.FILE
        ): EdgeM3Embedder = withContext(Dispatchers.IO) { fromAssets(context, threads, weightCache, dir, modelCopy) }

        /**
         * The same from a directory on disk: a fast-follow / on-demand Play Asset Delivery pack
         * (`AssetPackManager.getPackLocation(pack)!!.assetsPath()` + "/edge_m3"), or a download.
         * No copy: the runtime maps the file; every listed file is checked (LocalBundle). Pass `WeightCache.inCacheDir(context)` to keep the
         * packed weights between starts (the default packs them in memory at every start). The
         * first load's checksum success is remembered in `checksumMemo` (null: hash every load).
         */
        fun fromDirectory(
            dir: File,
            threads: Int = EdgeM3Contract.DEVICE_THREADS,
            weightCache: WeightCache = WeightCache.InMemory,
            checksumMemo: File? = dir,
            accelerator: EdgeM3Accelerator = EdgeM3Accelerator.CPU
        ): EdgeM3Embedder {
            checkOptions(threads, weightCache, accelerator)
            val b = LocalBundle.open(dir, checksumMemo)
            val runner = ModelRunners.open(b.modelFile, b.model.signatures, b.modelEntry.sha256, threads, weightCache, accelerator)
            return EdgeM3Embedder(b.manifest, b.model, runner, b.tokenizer)
        }

        private fun checkOptions(threads: Int, weightCache: WeightCache, accelerator: EdgeM3Accelerator) {
            if (threads < 1) throw EdgeM3Exception("threads $threads: must be at least 1")
            if (accelerator == EdgeM3Accelerator.GPU && weightCache is WeightCache.Off) {
                throw EdgeM3Exception("accelerator GPU: needs LiteRT's CompiledModel, not WeightCache.Off's Interpreter")
            }
        }

        /** [fromDirectory] on Dispatchers.IO: main-safe. */
        suspend fun load(
            dir: File,
            threads: Int = EdgeM3Contract.DEVICE_THREADS,
            weightCache: WeightCache = WeightCache.InMemory,
            checksumMemo: File? = dir
        ): EdgeM3Embedder = withContext(Dispatchers.IO) { fromDirectory(dir, threads, weightCache, checksumMemo) }

        /**
         * The asset as a file in `into`, named by its SHA-256: copied once (hashed on the way, written
         * to a temporary name and renamed, so a crash leaves no half model), then reused while the
         * size matches. Copies of other models in `into` go (an app update's old bundle).
         */
        fun extractAsset(assets: AssetManager, path: String, expected: FileEntry, into: File): File {
            val name = expected.sha256.take(EdgeM3Contract.WEIGHT_CACHE_KEY_CHARS) + "-" + File(path).name
            val target = File(into, name)
            if (target.isFile && target.length() == expected.size) return target
            into.mkdirs()
            into.listFiles()?.forEach { if (it.name != name) it.delete() }
            val tmp = File(into, "$name.part")
            val digest = MessageDigest.getInstance("SHA-256")
            DigestInputStream(assets.open(path), digest).use { input ->
                FileOutputStream(tmp).use { out -> input.copyTo(out, 1 shl 20) }
            }
            val actual = ModelCheck.hex(digest)
            if (tmp.length() != expected.size || actual != expected.sha256) {
                tmp.delete()
                throw EdgeM3CorruptBundleException("assets/$path: ${tmp.length()} bytes, sha256 $actual; manifest.json says " +
                    "${expected.size} bytes, ${expected.sha256}; copy the bundle again (make build)")
            }
            if (!tmp.renameTo(target)) throw EdgeM3Exception("$target: cannot write (disk full?)")
            return target
        }

        fun readJsonAsset(assets: AssetManager, path: String): Any? =
            MiniJson.parse(assets.open(path).use { it.readBytes().toString(Charsets.UTF_8) })

        /** The asset's descriptor in the APK; it must be stored uncompressed (noCompress "tflite", see README). */
        fun openAssetFd(assets: AssetManager, path: String): AssetFileDescriptor = try {
            assets.openFd(path)
        } catch (exc: FileNotFoundException) {
            throw EdgeM3Exception("assets/$path: cannot be memory-mapped (missing, or compressed in the " +
                "APK: add androidResources { noCompress += listOf(\"tflite\") })")
        }

        /** Memory-maps an asset (no copy: the APK's pages); it must be stored uncompressed. */
        fun mapAsset(assets: AssetManager, path: String): MappedByteBuffer {
            openAssetFd(assets, path).use {
                FileInputStream(it.fileDescriptor).use { stream ->
                    // The mapping stays valid after the stream closes.
                    return stream.channel.map(FileChannel.MapMode.READ_ONLY, it.startOffset, it.declaredLength)
                }
            }
        }
    }
}
