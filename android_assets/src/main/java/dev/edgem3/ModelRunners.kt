package dev.edgem3

import android.content.res.AssetManager
import com.google.ai.edge.litert.Accelerator
import com.google.ai.edge.litert.CompiledModel
import com.google.ai.edge.litert.LiteRtException
import com.google.ai.edge.litert.TensorBuffer
import com.google.ai.edge.litert.TensorType
import org.tensorflow.lite.DataType
import org.tensorflow.lite.Interpreter
import java.io.File
import java.nio.ByteBuffer
import java.nio.ByteOrder

// How the kit runs the .tflite on the CPU, with the settings the harness measured
// (docs/benchmarks.md, "Memory on the device"): XNNPACK, EdgeM3Contract.DEVICE_THREADS threads,
// and a weight cache so that the weights every signature shares are packed once per model.

/**
 * Where XNNPACK keeps the packed weights. Without a cache each signature's subgraph packs its own
 * copy (full-size int8 with 6 signatures: 3.8x the file in RAM on desktop LiteRT; with one: 1.07x).
 */
sealed class WeightCache {
    /**
     * A file in `dir`, named by the model's SHA-256 and `runtimeKey`: the first start packs and
     * writes it, later starts map it (Python's LiteRT on a desktop: 59 ms instead of 436 ms to the first result).
     * `runtimeKey` must change whenever the LiteRT build may (an app update): [inCacheDir] uses the
     * APK's modification time. Costs disk about the size of the packed weights.
     */
    class InFile(val dir: File, val runtimeKey: String) : WeightCache()

    /** Packed once per model, in memory, at every start. */
    object InMemory : WeightCache()

    /** The plain `Interpreter` API: one packed copy per signature (no cache: LiteRT's Interpreter has no option). */
    object Off : WeightCache()

    companion object {
        /** The app's cache folder (the OS may purge it: the next start packs again), keyed by the installed APK. */
        fun inCacheDir(context: android.content.Context): WeightCache =
            InFile(File(context.cacheDir, EdgeM3Contract.ASSET_DIR), "apk" + File(context.packageCodePath).lastModified())
    }
}

object ModelRunners {
    /**
     * Opens `modelFile` (memory-mapped by the runtime) with `threads` XNNPACK threads and `cache`,
     * checking that every signature of `signatures` is in the model with the manifest's tensor
     * names, shapes and dtypes. `sha256`: the manifest's, for the cache file's name. A cache file
     * that fails to open (a crash mid-write) is deleted and packed again.
     */
    fun open(modelFile: File, signatures: List<Signature>, sha256: String, threads: Int, cache: WeightCache,
             accelerator: EdgeM3Accelerator = EdgeM3Accelerator.CPU): LoadedModel {
        if (cache is WeightCache.Off) {
            val buffer = java.io.FileInputStream(modelFile).use { s ->
                s.channel.map(java.nio.channels.FileChannel.MapMode.READ_ONLY, 0, s.channel.size())
            }
            return TfliteRunner.open(buffer, signatures, modelFile.name, threads)
        }
        return compiled(modelFile.name, signatures, sha256, threads, cache, accelerator) { CompiledModel.create(modelFile.path, it) }
    }

    /**
     * The model straight from an APK asset (an install-time asset pack's included) on
     * `CompiledModel.create(assetManager, path)`: no file copy, but LiteRT (2.2.0,
     * litert_compiled_model_jni.cc nativeCreateFromAsset) copies the whole asset into native
     * memory and keeps that copy while the model is open: about the file's size more RAM, which
     * the OS cannot page out (a mapped file's clean pages it can). Not for [WeightCache.Off].
     */
    fun openAsset(assets: AssetManager, path: String, signatures: List<Signature>, sha256: String, threads: Int,
                  cache: WeightCache, accelerator: EdgeM3Accelerator = EdgeM3Accelerator.CPU): LoadedModel {
        if (cache is WeightCache.Off) throw EdgeM3Exception("assets/$path: WeightCache.Off maps the asset (EdgeM3Embedder.fromAssets)")
        return compiled(File(path).name, signatures, sha256, threads, cache, accelerator) { CompiledModel.create(assets, path, it) }
    }

    // One open at a time in the process: XNNPACK truncates a cache file it cannot load, so a
    // second embedder must not start on the file while the first is still writing it.
    private fun compiled(where: String, signatures: List<Signature>, sha256: String, threads: Int, cache: WeightCache,
                         accelerator: EdgeM3Accelerator, create: (CompiledModel.Options) -> CompiledModel): LoadedModel = synchronized(this) {
        val path = if (cache is WeightCache.InFile) cacheFile(cache, sha256) else null
        val cachePath = path?.path ?: EdgeM3Contract.IN_MEMORY_WEIGHT_CACHE
        try {
            CompiledModelRunner.open(where, signatures, threads, cachePath, create, accelerator)
        } catch (exc: LiteRtException) {
            if (path == null || !path.isFile) throw EdgeM3RuntimeFailedException("$where: ${exc.message}", exc)
            path.delete()
            try {
                CompiledModelRunner.open(where, signatures, threads, cachePath, create, accelerator)
            } catch (again: LiteRtException) {
                throw EdgeM3RuntimeFailedException("$where: ${again.message}", again)
            }
        }
    }

    /**
     * `block` with a missing runtime as one typed error: the runtime's classes load their JNI
     * library when first used (LiteRT: `System.loadLibrary("litert_jni")` in CompiledModel's
     * initializer), so an app without it, or without it for this ABI, gets UnsatisfiedLinkError
     * and then NoClassDefFoundError, both LinkageErrors.
     */
    inline fun <T> withRuntime(where: String, block: () -> T): T = try {
        block()
    } catch (exc: LinkageError) {
        throw EdgeM3RuntimeMissingException("$where: the LiteRT runtime is not in the app ($exc); add " +
            "com.google.ai.edge.litert:litert for this device's ABI (README, step 3)", exc)
    }

    /** This model's cache file; other runtime builds' files in the folder are stale and go. */
    fun cacheFile(cache: WeightCache.InFile, sha256: String): File {
        val name = EdgeM3Contract.weightCacheName(sha256, cache.runtimeKey)
        val current = name.substring(EdgeM3Contract.WEIGHT_CACHE_KEY_CHARS)  // "-<key>.xnnpack_cache"
        cache.dir.mkdirs()
        cache.dir.listFiles()?.forEach { f ->
            if (f.name.endsWith(EdgeM3Contract.WEIGHT_CACHE_SUFFIX) && !f.name.endsWith(current)) f.delete()
        }
        return File(cache.dir, name)
    }
}

/**
 * LiteRT's `CompiledModel` on the CPU with an XNNPACK weight cache (`CpuOptions.xnnPackWeightCachePath`,
 * LiteRT >= 2.0). At open every signature of the manifest is checked against the model (names,
 * shapes, dtypes: a dtype LiteRT would silently reinterpret, TensorBuffer.readFloat reading any
 * element type as float32), then input and output buffers are made once per signature.
 * Not thread-safe: EdgeM3Embedder takes turns.
 */
class CompiledModelRunner private constructor(private val where: String, private val model: CompiledModel) : LoadedModel {
    private class Io(val inputs: Map<String, TensorBuffer>, val outputs: Map<String, TensorBuffer>)

    private val io = HashMap<String, Io>()
    private var closed = false

    override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
        if (closed) throw EdgeM3ClosedException("$where: the model is closed")
        val buffers = io[signature.name] ?: throw EdgeM3Exception("$where: no open signature ${signature.name}")
        return try {
            for ((name, values) in ModelIo.inputs(signature, inputIds, attentionMask)) buffers.inputs.getValue(name).writeInt(values)
            model.run(buffers.inputs, buffers.outputs, signature.name)
            ModelIo.outputs(signature) { buffers.outputs.getValue(it).readFloat() }
        } catch (exc: LiteRtException) {
            throw EdgeM3RuntimeFailedException("$where: ${signature.name}: ${exc.message}", exc)
        }
    }

    override fun close() {
        for (b in io.values) {
            b.inputs.values.forEach { it.close() }
            b.outputs.values.forEach { it.close() }
        }
        io.clear()
        model.close()
        closed = true
    }

    /**
     * The model's own view of `s` (null: no such signature). LiteRT's Kotlin API (2.2.0) lists no
     * tensor names per signature, so the tensors are looked up by the manifest's names and counted
     * with createInput/OutputBuffers; a tensor the manifest does not name shows as [UNNAMED].
     */
    private fun modelView(s: Signature): Signature? {
        fun count(make: () -> List<TensorBuffer>): Int = make().let { b -> b.forEach { it.close() }; b.size }
        val inputs = try {
            count { model.createInputBuffers(s.name) }
        } catch (exc: LiteRtException) {
            // Not only a missing signature fails so: when LiteRT types one of its inputs, the signature
            // is there and the failure is the runtime's own (a buffer it could not allocate).
            val there = s.inputs.any { t ->
                try {
                    model.getInputTensorType(t.name, s.name)
                    true
                } catch (missing: LiteRtException) {
                    false
                }
            }
            if (there) throw exc
            return null
        }
        val outputs = count { model.createOutputBuffers(s.name) }
        // A tensor whose type getter fails but whose buffer can be made is there, of an element type
        // LiteRT's Kotlin enum lacks (ErrorUnsupported, "Unsupported element type in Kotlin").
        fun specs(names: List<String>, n: Int, type: (String) -> TensorType, buffer: (String) -> TensorBuffer): List<TensorSpec> {
            val found = names.mapNotNull { name ->
                val t = try {
                    type(name)
                } catch (exc: LiteRtException) {
                    val there = try {
                        buffer(name).close()
                        true
                    } catch (missing: LiteRtException) {
                        false
                    }
                    if (there) throw EdgeM3ModelMismatchException("$where: ${s.name}: tensor $name is of a type LiteRT's " +
                        "Kotlin API cannot read (${exc.message}); manifest.json and the model file disagree", exc)
                    null
                }
                t?.let { TensorSpec(name, it.layout?.dimensions?.toIntArray() ?: IntArray(0), dtypeName(it.elementType)) }
            }
            return found + List(maxOf(0, n - found.size)) { TensorSpec(UNNAMED, IntArray(0), "?") }
        }
        return Signature(s.name, s.seqLen,
            specs(s.inputs.map { it.name }, inputs, { model.getInputTensorType(it, s.name) }, { model.createInputBuffer(it, s.name) }),
            specs(s.outputs.map { it.name }, outputs, { model.getOutputTensorType(it, s.name) }, { model.createOutputBuffer(it, s.name) }))
    }

    companion object {
        /** How a tensor the manifest does not name appears in a mismatch message. */
        const val UNNAMED = "(a tensor manifest.json does not name)"

        /** LiteRT's GPU accelerator from 2.3 on (the catalog's libs.litert.gpu; README, "The GPU"). */
        const val GPU_ARTIFACT = "com.google.ai.edge.litert:litert-gpu"

        /**
         * LiteRT's element types (TensorType.ElementType, LiteRT 2.2.0) in the manifest's spelling, by
         * constant name and not an exhaustive `when`: a type a newer LiteRT adds builds, and reads as a
         * dtype no manifest has (a signature mismatch, EdgeM3ModelMismatchException).
         */
        private val ELEMENT_TYPES = mapOf("INT" to "int32", "FLOAT" to "float32", "INT64" to "int64", "INT8" to "int8",
            "BOOLEAN" to "bool")

        fun dtypeName(t: TensorType.ElementType): String = ELEMENT_TYPES[t.name] ?: "LiteRT ${t.name}"

        fun open(where: String, signatures: List<Signature>, threads: Int, cachePath: String,
                 create: (CompiledModel.Options) -> CompiledModel,
                 accelerator: EdgeM3Accelerator = EdgeM3Accelerator.CPU): CompiledModelRunner = ModelRunners.withRuntime(where) {
            // The GPU: LiteRT's GPU accelerator with no CPU options (no XNNPACK, no weight cache).
            val options = if (accelerator == EdgeM3Accelerator.GPU) CompiledModel.Options(Accelerator.GPU)
                else CompiledModel.Options(Accelerator.CPU).also {
                    it.cpuOptions = CompiledModel.CpuOptions(numThreads = threads, xnnPackWeightCachePath = cachePath)
                }
            val model = try {
                create(options)
            } catch (exc: LiteRtException) {
                if (accelerator != EdgeM3Accelerator.GPU) throw exc
                // LiteRT >= 2.3 ships its GPU accelerator as its own artifact: without it a GPU-only
                // model fails to compile (no accelerator took the ops, the CPU is not in the set).
                throw EdgeM3RuntimeFailedException("$where: LiteRT could not put the model on the GPU (${exc.message}). From " +
                    "LiteRT 2.3 the GPU accelerator is its own artifact, $GPU_ARTIFACT: without it every GPU request fails " +
                    "so; with it, a model the GPU cannot run whole fails so too. EdgeM3Accelerator.CPU runs everywhere", exc)
            }
            val runner = CompiledModelRunner(where, model)
            try {
                val views = LinkedHashMap<String, Signature>()
                for (s in signatures) {
                    views[s.name] = runner.modelView(s) ?: throw EdgeM3ModelMismatchException("$where: no signature " +
                        "${s.name} in the model; manifest.json and the model file disagree")
                }
                ModelIo.checkSignatures(where, signatures, views)
                for (s in signatures) {
                    runner.io[s.name] = Io(s.inputs.map { it.name }.associateWith { runner.model.createInputBuffer(it, s.name) },
                        s.outputs.map { it.name }.associateWith { runner.model.createOutputBuffer(it, s.name) })
                }
            } catch (exc: Exception) {
                runner.close()
                throw exc
            }
            runner
        }
    }
}

/**
 * A TFLite / LiteRT `Interpreter` (no weight cache): int32 in, float32 out, as flat native buffers.
 * Every signature of the manifest is checked against the model's (names, shapes, dtypes) at open.
 */
class TfliteRunner(private val interpreter: Interpreter, private val where: String = "model") : LoadedModel {
    private var closed = false

    override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
        if (closed) throw EdgeM3ClosedException("$where: the model is closed")
        val inputs = ModelIo.inputs(signature, inputIds, attentionMask).mapValues { (_, v) ->
            val b = ByteBuffer.allocateDirect(4 * v.size).order(ByteOrder.nativeOrder())
            b.asIntBuffer().put(v)
            b
        }
        val outputs = signature.outputs.associate { t ->
            t.name to ByteBuffer.allocateDirect(4 * ModelIo.elements(t.shape)).order(ByteOrder.nativeOrder())
        }
        try {
            interpreter.runSignature(inputs, outputs, signature.name)
        } catch (exc: IllegalArgumentException) {
            throw EdgeM3RuntimeFailedException("$where: ${signature.name}: ${exc.message}", exc)
        } catch (exc: IllegalStateException) {  // the native allocation or invoke failed (nativesignaturerunner_jni.cc)
            throw EdgeM3RuntimeFailedException("$where: ${signature.name}: ${exc.message}", exc)
        }
        return ModelIo.outputs(signature) { name ->
            val b = outputs.getValue(name)
            b.rewind()
            FloatArray(b.capacity() / 4).also { b.asFloatBuffer().get(it) }
        }
    }

    override fun close() {
        if (!closed) interpreter.close()
        closed = true
    }

    companion object {
        /** TF Lite's DataType in the manifest's spelling, by constant name (see CompiledModelRunner.dtypeName). */
        private val DATA_TYPES = mapOf("FLOAT32" to "float32", "INT32" to "int32", "INT64" to "int64", "INT8" to "int8",
            "UINT8" to "uint8", "INT16" to "int16", "BOOL" to "bool", "STRING" to "string")

        fun dtypeName(t: DataType): String = DATA_TYPES[t.name] ?: "TF Lite ${t.name}"

        /** A mapped model (a file, or an uncompressed APK asset) with XNNPACK and `threads` threads. */
        fun open(buffer: ByteBuffer, signatures: List<Signature>, where: String, threads: Int): TfliteRunner {
            val interpreter = ModelRunners.withRuntime(where) {
                try {
                    Interpreter(buffer, Interpreter.Options().setNumThreads(threads).setUseXNNPACK(true))
                } catch (exc: IllegalArgumentException) {
                    throw EdgeM3RuntimeFailedException("$where: not a model LiteRT can read (${exc.message})", exc)
                }
            }
            try {
                val views = interpreter.signatureKeys.associate { k ->
                    k to Signature(k, 0,
                        interpreter.getSignatureInputs(k).map { n ->
                            interpreter.getInputTensorFromSignature(n, k).let { TensorSpec(n, it.shape(), dtypeName(it.dataType())) }
                        },
                        interpreter.getSignatureOutputs(k).map { n ->
                            interpreter.getOutputTensorFromSignature(n, k).let { TensorSpec(n, it.shape(), dtypeName(it.dataType())) }
                        })
                }
                ModelIo.checkSignatures(where, signatures, views)
            } catch (exc: Exception) {
                interpreter.close()
                // A tensor of a type the Java enum lacks fails as it is fetched (DataTypeUtils.fromC).
                if (exc is IllegalArgumentException) throw EdgeM3ModelMismatchException("$where: a tensor of a type " +
                    "LiteRT's Interpreter API cannot read (${exc.message}); manifest.json and the model file disagree", exc)
                throw exc
            }
            return TfliteRunner(interpreter, where)
        }
    }
}
