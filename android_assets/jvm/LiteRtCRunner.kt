// The kit's live runner on the desktop JVM: LiteRT's C API (libLiteRt.so, as the ai-edge-litert
// wheel ships it) through JNA, behind the kit's ModelRunner. Not part of the Android library (a
// phone runs ModelRunners.kt's CompiledModel binding); CI replays golden.json through it
// (GoldenCheck --live) and tools/kit/kit_embed.sh embeds with it (KitEmbed.kt).
//
// The function types are declared here from LiteRT's public headers (litert/c/*.h: environment,
// model, options, opaque options, compiled model, tensor buffer); no header is copied. Everything
// that maps names to tensors and shapes outputs is the shared ModelIo (ModelRunner.kt).
package dev.edgem3

import com.sun.jna.Callback
import com.sun.jna.Function
import com.sun.jna.Memory
import com.sun.jna.NativeLibrary
import com.sun.jna.Pointer
import com.sun.jna.ptr.LongByReference
import com.sun.jna.ptr.PointerByReference
import java.io.File

/** The few C functions the runner calls, resolved once from the library it is given. */
private class LiteRtC(val path: String) {
    private val lib: NativeLibrary = try {
        if (!File(path).isFile) throw UnsatisfiedLinkError("not found")
        NativeLibrary.getInstance(File(path).absolutePath)  // a path, never a name searched for
    } catch (exc: UnsatisfiedLinkError) {
        // JNA's message lists every place it tried; the dlopen line says why (e.g. invalid ELF header).
        val lines = (exc.message ?: "cannot be loaded").lines().map { it.trim() }.filter { it.isNotEmpty() }
        val why = lines.firstOrNull { it.contains(": ") && !it.startsWith("Unable to load library") }
            ?.substringAfterLast(": ") ?: lines.first()
        throw EdgeM3RuntimeMissingException("$path: cannot load the LiteRT library ($why); give the ai-edge-litert wheel's " +
            "ai_edge_litert/libLiteRt.so")
    }
    private val functions = HashMap<String, Function>()

    init {
        for (name in NAMES) {
            functions[name] = try {
                lib.getFunction(name)
            } catch (exc: UnsatisfiedLinkError) {
                throw EdgeM3RuntimeMissingException("$path: not LiteRT's C API (no $name); give the ai-edge-litert wheel's " +
                    "ai_edge_litert/libLiteRt.so (LiteRT >= 2.0)")
            }
        }
    }

    /** Calls a `LiteRtStatus f(...)`; a status other than kLiteRtStatusOk throws, naming `what`. */
    fun call(name: String, what: String, vararg args: Any?) {
        val status = functions.getValue(name).invokeInt(args)
        if (status != 0) throw EdgeM3RuntimeFailedException("$what: LiteRT $name failed: ${statusName(status)}")
    }

    /** Calls a `void f(handle)` destructor; a null handle is skipped. */
    fun destroy(name: String, handle: Pointer?) {
        if (handle != null) functions.getValue(name).invokeVoid(arrayOf<Any?>(handle))
    }

    companion object {
        val NAMES = listOf(
            "LiteRtCreateEnvironment", "LiteRtDestroyEnvironment",
            "LiteRtCreateModelFromFile", "LiteRtDestroyModel",
            "LiteRtGetNumModelSignatures", "LiteRtGetModelSignature", "LiteRtGetSignatureKey",
            "LiteRtGetNumSignatureInputs", "LiteRtGetSignatureInputName", "LiteRtGetSignatureInputTensorByIndex",
            "LiteRtGetNumSignatureOutputs", "LiteRtGetSignatureOutputName", "LiteRtGetSignatureOutputTensorByIndex",
            "LiteRtGetRankedTensorType",
            "LiteRtCreateOptions", "LiteRtDestroyOptions", "LiteRtSetOptionsHardwareAccelerators",
            "LiteRtCreateOpaqueOptions", "LiteRtAddOpaqueOptions",
            "LiteRtCreateCompiledModel", "LiteRtDestroyCompiledModel",
            "LiteRtGetCompiledModelInputBufferRequirements", "LiteRtGetCompiledModelOutputBufferRequirements",
            "LiteRtCreateManagedTensorBufferFromRequirements", "LiteRtDestroyTensorBuffer",
            "LiteRtGetTensorBufferSize", "LiteRtLockTensorBuffer", "LiteRtUnlockTensorBuffer",
            "LiteRtRunCompiledModel"
        )

        // LiteRtStatus (litert_common.h): the codes a caller can act on, by name.
        private val STATUS = mapOf(1 to "invalid argument", 2 to "memory allocation failure", 3 to "runtime failure",
            4 to "missing input tensor", 5 to "unsupported", 6 to "not found", 8 to "wrong version",
            9 to "unknown error", 500 to "file I/O error", 501 to "invalid flatbuffer",
            502 to "dynamic loading error", 504 to "compilation error")

        fun statusName(status: Int): String = "${STATUS[status] ?: "error"} (status $status)"
    }
}

/** LiteRtElementType (litert_model_types.h) as the manifest writes dtypes (numpy's names). */
private val ELEMENT_TYPES = mapOf(1 to "float32", 2 to "int32", 3 to "uint8", 4 to "int64", 6 to "bool",
    7 to "int16", 9 to "int8", 10 to "float16", 11 to "float64", 18 to "int4")

/** A buffer of one signature input or output, with the shape and dtype the model reports. */
private class Port(val name: String, val tensor: TensorSpec, val type: Memory, var buffer: Pointer? = null)

private class SignatureIo(val index: Long, val inputs: List<Port>, val outputs: List<Port>) {
    /** The buffers' handles as the C arrays LiteRtRunCompiledModel takes, filled once at open. */
    val inputHandles = Memory(8L * maxOf(1, inputs.size))
    val outputHandles = Memory(8L * maxOf(1, outputs.size))
}

/** No-op destructor for the CPU options payload: the runner owns that memory and frees it at close. */
private object KeepPayload : Callback {
    @Suppress("unused", "UNUSED_PARAMETER")
    fun invoke(payload: Pointer?) {
    }
}

/**
 * A .tflite opened with LiteRT's C API on the CPU (XNNPACK, `threads` threads, weights packed
 * once in memory as Python's LiteRTRunner does). Buffers are made once per signature at open,
 * where every signature of the manifest is checked against the model's own (names, shapes,
 * dtypes). Not thread-safe. close() frees everything; a closed runner refuses to run.
 */
class LiteRtCRunner private constructor(private val c: LiteRtC, private val where: String) : LoadedModel {
    private var env: Pointer? = null
    private var model: Pointer? = null
    private var options: Pointer? = null
    private var compiled: Pointer? = null
    private var payload: Memory? = null
    private val io = HashMap<String, SignatureIo>()

    override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
        val s = io[signature.name] ?: throw EdgeM3Exception("$where: no open signature ${signature.name}")
        val inputs = ModelIo.inputs(signature, inputIds, attentionMask)
        for (p in s.inputs) write(p, inputs.getValue(p.name))
        c.call("LiteRtRunCompiledModel", "$where: ${signature.name}", compiled, s.index, s.inputs.size.toLong(),
            s.inputHandles, s.outputs.size.toLong(), s.outputHandles)
        return ModelIo.outputs(signature) { name -> read(s.outputs.first { it.name == name }) }
    }

    private fun lock(p: Port, mode: Int): Pointer {
        val host = PointerByReference()
        c.call("LiteRtLockTensorBuffer", "$where: ${p.name}", p.buffer, host, mode)
        return host.value ?: throw EdgeM3Exception("$where: ${p.name}: LiteRT gave no host memory")
    }

    private fun write(p: Port, values: IntArray) {
        val host = lock(p, LOCK_WRITE)
        try {
            host.write(0, values, 0, values.size)
        } finally {
            c.call("LiteRtUnlockTensorBuffer", "$where: ${p.name}", p.buffer)
        }
    }

    private fun read(p: Port): FloatArray {
        val out = FloatArray(ModelIo.elements(p.tensor.shape))
        val host = lock(p, LOCK_READ)
        try {
            host.read(0, out, 0, out.size)
        } finally {
            c.call("LiteRtUnlockTensorBuffer", "$where: ${p.name}", p.buffer)
        }
        return out
    }

    override fun close() {
        for (s in io.values) for (p in s.inputs + s.outputs) {
            c.destroy("LiteRtDestroyTensorBuffer", p.buffer)
            p.buffer = null
        }
        io.clear()
        c.destroy("LiteRtDestroyCompiledModel", compiled)
        c.destroy("LiteRtDestroyOptions", options)
        c.destroy("LiteRtDestroyModel", model)
        c.destroy("LiteRtDestroyEnvironment", env)
        compiled = null
        options = null
        model = null
        env = null
        payload = null
    }

    /** The model's own signatures (key -> index, inputs, outputs in the model's order). */
    private fun modelSignatures(): Map<String, SignatureIo> {
        val out = LinkedHashMap<String, SignatureIo>()
        val count = LongByReference()
        c.call("LiteRtGetNumModelSignatures", where, model, count)
        for (i in 0L until count.value) {
            val sig = PointerByReference()
            c.call("LiteRtGetModelSignature", where, model, i, sig)
            val key = PointerByReference()
            c.call("LiteRtGetSignatureKey", where, sig.value, key)
            val name = key.value.getString(0, "UTF-8")
            out[name] = SignatureIo(i, ports(sig.value, name, "Input"), ports(sig.value, name, "Output"))
        }
        return out
    }

    private fun ports(sig: Pointer, signature: String, kind: String): List<Port> {
        val n = LongByReference()
        c.call("LiteRtGetNumSignature${kind}s", "$where: $signature", sig, n)
        return (0L until n.value).map { j ->
            val namePtr = PointerByReference()
            c.call("LiteRtGetSignature${kind}Name", "$where: $signature", sig, j, namePtr)
            val name = namePtr.value.getString(0, "UTF-8")
            val tensor = PointerByReference()
            c.call("LiteRtGetSignature${kind}TensorByIndex", "$where: $signature.$name", sig, j, tensor)
            // LiteRtRankedTensorType (72 bytes on 64-bit): element type, then LiteRtLayout with
            // the rank in the low 7 bits of its first word and int32 dimensions[8] at offset 8.
            val type = Memory(RANKED_TENSOR_TYPE_BYTES)
            type.clear()
            c.call("LiteRtGetRankedTensorType", "$where: $signature.$name", tensor.value, type)
            val rank = type.getInt(4) and 0x7f
            val dtype = ELEMENT_TYPES[type.getInt(0)] ?: "element type ${type.getInt(0)}"
            Port(name, TensorSpec(name, IntArray(rank) { type.getInt(8L + 4 * it) }, dtype), type)
        }
    }

    private fun makeBuffer(s: SignatureIo, p: Port, index: Long, input: Boolean, signature: String) {
        val req = PointerByReference()
        val what = "$where: $signature.${p.name}"
        c.call(if (input) "LiteRtGetCompiledModelInputBufferRequirements" else "LiteRtGetCompiledModelOutputBufferRequirements",
            what, compiled, s.index, index, req)
        val buffer = PointerByReference()
        c.call("LiteRtCreateManagedTensorBufferFromRequirements", what, env, p.type, req.value, buffer)
        p.buffer = buffer.value
        val size = LongByReference()
        c.call("LiteRtGetTensorBufferSize", what, p.buffer, size)
        val need = 4L * ModelIo.elements(p.tensor.shape)
        if (size.value < need) throw EdgeM3Exception("$what: LiteRT buffer of ${size.value} bytes, $need needed")
    }

    private fun open(modelFile: File, signatures: List<Signature>, threads: Int) {
        val envRef = PointerByReference()
        c.call("LiteRtCreateEnvironment", where, 0, null, envRef)
        env = envRef.value
        val modelRef = PointerByReference()
        c.call("LiteRtCreateModelFromFile", "$where: not a model LiteRT can read", env, modelFile.path, modelRef)
        model = modelRef.value
        val own = modelSignatures()
        ModelIo.checkSignatures(where, signatures, own.mapValues { (name, s) ->
            Signature(name, 0, s.inputs.map { it.tensor }, s.outputs.map { it.tensor })
        })
        val optRef = PointerByReference()
        c.call("LiteRtCreateOptions", where, optRef)
        options = optRef.value
        c.call("LiteRtSetOptionsHardwareAccelerators", where, options, HW_CPU)
        // CPU options travel as TOML text under the "xnnpack" identifier (litert_cpu_options.h,
        // LrtGetOpaqueCpuOptionsData); the wheel's libLiteRt.so does not export the Lrt*CpuOptions
        // helpers, so the runner writes the text itself. In-memory weight cache as Python's runner.
        val toml = "num_threads = $threads\nweight_cache_file_path = \"${EdgeM3Contract.IN_MEMORY_WEIGHT_CACHE}\"\n"
        val text = Memory(toml.length + 1L)
        text.setString(0, toml, "UTF-8")
        payload = text
        val opaque = PointerByReference()
        c.call("LiteRtCreateOpaqueOptions", where, CPU_OPTIONS_ID, text, KeepPayload, opaque)
        c.call("LiteRtAddOpaqueOptions", where, options, opaque.value)
        val cmRef = PointerByReference()
        c.call("LiteRtCreateCompiledModel", "$where: LiteRT cannot compile this model", env, model, options, cmRef)
        compiled = cmRef.value
        for (s in signatures) {
            val mine = own.getValue(s.name)
            for ((j, p) in mine.inputs.withIndex()) {
                makeBuffer(mine, p, j.toLong(), true, s.name)
                mine.inputHandles.setPointer(8L * j, p.buffer)
            }
            for ((j, p) in mine.outputs.withIndex()) {
                makeBuffer(mine, p, j.toLong(), false, s.name)
                mine.outputHandles.setPointer(8L * j, p.buffer)
            }
            io[s.name] = mine
        }
    }

    companion object {
        private const val RANKED_TENSOR_TYPE_BYTES = 72L
        private const val HW_CPU = 1  // kLiteRtHwAcceleratorCpu
        private const val LOCK_READ = 0  // kLiteRtTensorBufferLockModeRead
        private const val LOCK_WRITE = 1  // kLiteRtTensorBufferLockModeWrite
        private const val CPU_OPTIONS_ID = "xnnpack"  // LrtGetCpuOptionsIdentifier()

        /** Python's LiteRT runner uses 1 thread unless told otherwise (edge_m3/runtime/runners.py). */
        const val DEFAULT_THREADS = 1

        /**
         * Opens `modelFile` on the LiteRT library at `library` (a path) with `threads` XNNPACK
         * threads; every signature of `signatures` must be in the model as the manifest says.
         * Errors (missing or wrong library, a file LiteRT cannot run, other signatures) are one
         * EdgeM3Exception each, naming the file.
         */
        fun open(library: String, modelFile: File, signatures: List<Signature>,
                 threads: Int = DEFAULT_THREADS): LiteRtCRunner {
            if (threads < 1) throw EdgeM3Exception("threads $threads: must be at least 1")
            if (!modelFile.isFile) throw EdgeM3CorruptBundleException("$modelFile: not found")
            val runner = LiteRtCRunner(LiteRtC(library), modelFile.name)
            try {
                runner.open(modelFile, signatures, threads)
            } catch (exc: Exception) {
                runner.close()
                throw exc
            }
            return runner
        }
    }
}
