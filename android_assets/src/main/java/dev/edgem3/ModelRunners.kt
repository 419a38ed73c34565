package dev.edgem3

import com.google.ai.edge.litert.Accelerator
import com.google.ai.edge.litert.CompiledModel
import com.google.ai.edge.litert.LiteRtException
import com.google.ai.edge.litert.TensorBuffer
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
     * checking that every signature of `signatures` exists. `sha256`: the manifest's, for the cache
     * file's name. A cache file that fails to open (a crash mid-write) is deleted and packed again.
     */
    fun open(modelFile: File, signatures: List<Signature>, sha256: String, threads: Int, cache: WeightCache): LoadedModel {
        if (cache is WeightCache.Off) {
            val buffer = java.io.FileInputStream(modelFile).use { s ->
                s.channel.map(java.nio.channels.FileChannel.MapMode.READ_ONLY, 0, s.channel.size())
            }
            return TfliteRunner.open(buffer, signatures, modelFile.name, threads)
        }
        val path = if (cache is WeightCache.InFile) cacheFile(cache, sha256) else null
        // One open at a time in the process: XNNPACK truncates a cache file it cannot load, so a
        // second embedder must not start on the file while the first is still writing it.
        synchronized(this) {
            return try {
                CompiledModelRunner.open(modelFile, signatures, threads, path?.path ?: EdgeM3Contract.IN_MEMORY_WEIGHT_CACHE)
            } catch (exc: LiteRtException) {
                if (path == null || !path.isFile) throw EdgeM3Exception("${modelFile.name}: ${exc.message}")
                path.delete()
                CompiledModelRunner.open(modelFile, signatures, threads, path.path)
            }
        }
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
 * LiteRT >= 2.0). Input and output buffers are made once per signature, at open: that is also
 * where a missing signature is caught. Not thread-safe: EdgeM3Embedder takes turns.
 */
class CompiledModelRunner private constructor(private val model: CompiledModel) : LoadedModel {
    private class Io(val inputs: Map<String, TensorBuffer>, val outputs: Map<String, TensorBuffer>)

    private val io = HashMap<String, Io>()

    override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
        val buffers = io[signature.name] ?: throw EdgeM3Exception("no signature ${signature.name}")
        for ((name, values) in ModelIo.inputs(signature, inputIds, attentionMask)) buffers.inputs.getValue(name).writeInt(values)
        model.run(buffers.inputs, buffers.outputs, signature.name)
        return ModelIo.outputs(signature) { buffers.outputs.getValue(it).readFloat() }
    }

    override fun close() {
        for (b in io.values) {
            b.inputs.values.forEach { it.close() }
            b.outputs.values.forEach { it.close() }
        }
        io.clear()
        model.close()
    }

    companion object {
        fun open(modelFile: File, signatures: List<Signature>, threads: Int, cachePath: String): CompiledModelRunner {
            val options = CompiledModel.Options(Accelerator.CPU)
            options.cpuOptions = CompiledModel.CpuOptions(numThreads = threads, xnnPackWeightCachePath = cachePath)
            val runner = CompiledModelRunner(CompiledModel.create(modelFile.path, options))
            try {
                for (s in signatures) {
                    val names = s.outputs.map { it.name }
                    runner.io[s.name] = try {
                        Io(s.inputs.map { it.name }.associateWith { runner.model.createInputBuffer(it, s.name) },
                            names.associateWith { runner.model.createOutputBuffer(it, s.name) })
                    } catch (exc: LiteRtException) {
                        throw EdgeM3Exception("${modelFile.name}: no signature ${s.name} with outputs $names (${exc.message})")
                    }
                }
            } catch (exc: Exception) {
                runner.close()
                throw exc
            }
            return runner
        }
    }
}

/** A TFLite / LiteRT `Interpreter` (no weight cache): int32 in, float32 out, as flat native buffers. */
class TfliteRunner(private val interpreter: Interpreter) : LoadedModel {
    override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
        val inputs = ModelIo.inputs(signature, inputIds, attentionMask).mapValues { (_, v) ->
            val b = ByteBuffer.allocateDirect(4 * v.size).order(ByteOrder.nativeOrder())
            b.asIntBuffer().put(v)
            b
        }
        val outputs = signature.outputs.associate { t ->
            t.name to ByteBuffer.allocateDirect(4 * ModelIo.elements(t.shape)).order(ByteOrder.nativeOrder())
        }
        interpreter.runSignature(inputs, outputs, signature.name)
        return ModelIo.outputs(signature) { name ->
            val b = outputs.getValue(name)
            b.rewind()
            FloatArray(b.capacity() / 4).also { b.asFloatBuffer().get(it) }
        }
    }

    override fun close() = interpreter.close()

    companion object {
        /** A mapped model (a file, or an uncompressed APK asset) with XNNPACK and `threads` threads. */
        fun open(buffer: ByteBuffer, signatures: List<Signature>, where: String, threads: Int): TfliteRunner {
            val interpreter = Interpreter(buffer, Interpreter.Options().setNumThreads(threads).setUseXNNPACK(true))
            val keys = interpreter.signatureKeys.toSet()
            for (s in signatures) {
                if (!keys.contains(s.name)) {
                    interpreter.close()
                    throw EdgeM3Exception("$where: no signature ${s.name} (has $keys)")
                }
            }
            return TfliteRunner(interpreter)
        }
    }
}
