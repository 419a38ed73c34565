package dev.edgem3

import android.content.Context
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.withContext
import java.io.File

// The embedder's options as a builder, the way MediaPipe's TextEmbedderOptions reads (README,
// "The API beside MediaPipe's"), and the enum overloads of the score modes (ScoreMode is generated
// from spec.SCORE_MODES into EdgeM3Contract.kt). The String-taking calls stay as they are.

/** Which hardware runs the model. */
enum class EdgeM3Accelerator {
    /** XNNPACK on the CPU, with the weight cache: what every figure in the README measured. */
    CPU,

    /**
     * LiteRT's GPU accelerator (`CompiledModel.Options(Accelerator.GPU)`); no weight cache, not with
     * [WeightCache.Off]. Never run here (no GPU on the desktop runners, no phone in CI).
     */
    GPU
}

/** Where the bundle is: the app's assets (an install-time asset pack's included) or a folder on disk. */
sealed class BundleSource {
    /** `assets/<dir>/` of the APK (default `edge_m3`, where `make build` puts it). */
    class Assets(val dir: String = EdgeM3Contract.ASSET_DIR) : BundleSource()

    /** A folder on disk: a fast-follow / on-demand asset pack, a download. */
    class Directory(val dir: File) : BundleSource()
}

/**
 * Everything [EdgeM3Embedder.createFromOptions] takes; made with [builder]:
 * ```
 * val options = EdgeM3Options.builder().setDirectory(dir).setThreads(2).build()
 * ```
 * Unset, each is what `fromAssets` / `fromDirectory` default to: assets/edge_m3, 2 threads
 * (EdgeM3Contract.DEVICE_THREADS), a weight cache file in the cache folder for assets or in memory
 * for a folder, the CPU, the model asset copied once to a file.
 */
class EdgeM3Options private constructor(
    val source: BundleSource,
    val threads: Int,
    /** null: the source's default (assets: `WeightCache.inCacheDir(context)`, a folder: `WeightCache.InMemory`). */
    val weightCache: WeightCache?,
    val accelerator: EdgeM3Accelerator,
    val modelCopy: ModelCopy,
    /** A folder source's checksum memo; null: hash every load (the default is the folder itself). */
    val checksumMemo: File?
) {
    class Builder internal constructor() {
        private var source: BundleSource = BundleSource.Assets()
        private var threads = EdgeM3Contract.DEVICE_THREADS
        private var weightCache: WeightCache? = null
        private var accelerator = EdgeM3Accelerator.CPU
        private var modelCopy = ModelCopy.FILE
        private var checksumMemo: File? = null
        private var memoSet = false

        fun setSource(source: BundleSource): Builder = apply { this.source = source }

        /** The bundle in `assets/<dir>/`. */
        fun setAssetDir(dir: String): Builder = apply { source = BundleSource.Assets(dir) }

        /** The bundle in a folder on disk. */
        fun setDirectory(dir: File): Builder = apply { source = BundleSource.Directory(dir) }

        /** XNNPACK threads inside one model call (1 or more). */
        fun setThreads(threads: Int): Builder = apply { this.threads = threads }

        fun setWeightCache(cache: WeightCache): Builder = apply { weightCache = cache }

        fun setAccelerator(accelerator: EdgeM3Accelerator): Builder = apply { this.accelerator = accelerator }

        /** How an asset source's model reaches LiteRT with a weight cache (README "Integrity"). */
        fun setModelCopy(copy: ModelCopy): Builder = apply { modelCopy = copy }

        /** A folder source's checksum memo (null: hash every load). */
        fun setChecksumMemo(memo: File?): Builder = apply { checksumMemo = memo; memoSet = true }

        /** The options; bad values throw [EdgeM3Exception] (kind `invalid_input`) naming the option. */
        fun build(): EdgeM3Options {
            if (threads < 1) throw EdgeM3Exception("threads $threads: must be at least 1")
            if (accelerator == EdgeM3Accelerator.GPU && weightCache is WeightCache.Off) {
                throw EdgeM3Exception("accelerator GPU: needs LiteRT's CompiledModel, not WeightCache.Off's Interpreter")
            }
            val s = source
            val memo = if (memoSet || s !is BundleSource.Directory) checksumMemo else s.dir
            return EdgeM3Options(s, threads, weightCache, accelerator, modelCopy, memo)
        }
    }

    companion object {
        @JvmStatic
        fun builder(): Builder = Builder()
    }
}

/**
 * MediaPipe's `TextEmbedder.createFromOptions(context, options)`: the bundle as `options` say.
 * Blocking (the first load copies and hashes the model): off the main thread, or [open].
 */
fun EdgeM3Embedder.Companion.createFromOptions(context: Context, options: EdgeM3Options): EdgeM3Embedder =
    when (val s = options.source) {
        is BundleSource.Assets -> fromAssets(context, options.threads, options.weightCache ?: WeightCache.inCacheDir(context),
            s.dir, options.modelCopy, options.accelerator)
        is BundleSource.Directory -> fromDirectory(s.dir, options.threads, options.weightCache ?: WeightCache.InMemory,
            options.checksumMemo, options.accelerator)
    }

/** A folder source needs no Context. */
fun EdgeM3Embedder.Companion.createFromOptions(options: EdgeM3Options): EdgeM3Embedder {
    val s = options.source as? BundleSource.Directory
        ?: throw EdgeM3Exception("an assets source needs a Context: createFromOptions(context, options)")
    return fromDirectory(s.dir, options.threads, options.weightCache ?: WeightCache.InMemory, options.checksumMemo,
        options.accelerator)
}

/** [createFromOptions] on Dispatchers.IO: main-safe. */
suspend fun EdgeM3Embedder.Companion.open(context: Context, options: EdgeM3Options): EdgeM3Embedder =
    withContext(Dispatchers.IO) { createFromOptions(context, options) }

/** `Retrieval.score` with the mode as an enum. */
fun Retrieval.score(q: Retrieval.Vectors, p: Retrieval.Vectors, mode: ScoreMode,
                    weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS): Double = score(q, p, mode.wire, weights)

/** `EdgeM3Index.search` with the mode as an enum. */
fun EdgeM3Index.search(query: Embedding, k: Int, mode: ScoreMode,
                       weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS, chunks: Boolean = false): List<EdgeM3Index.Hit> =
    search(query, k, mode.wire, weights, chunks)

/** `EdgeM3Index.search` with the mode as an enum. */
fun EdgeM3Index.search(query: Retrieval.Vectors, k: Int, mode: ScoreMode,
                       weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS, chunks: Boolean = false): List<EdgeM3Index.Hit> =
    search(query, k, mode.wire, weights, chunks)

/** `EdgeM3WritableIndex.search` with the mode as an enum. */
fun EdgeM3WritableIndex.search(query: Embedding, k: Int, mode: ScoreMode,
                               weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS, chunks: Boolean = false): List<EdgeM3WritableIndex.Hit> =
    search(query, k, mode.wire, weights, chunks)

/** `EdgeM3WritableIndex.search` with the mode as an enum. */
fun EdgeM3WritableIndex.search(query: Retrieval.Vectors, k: Int, mode: ScoreMode,
                               weights: DoubleArray = Retrieval.DEFAULT_WEIGHTS, chunks: Boolean = false): List<EdgeM3WritableIndex.Hit> =
    search(query, k, mode.wire, weights, chunks)
