// The stand-ins' native layer (CI only, not an Android or LiteRT API). The real classes load a
// JNI library in their static initializer (LiteRT 2.2.0: `System.loadLibrary("litert_jni")` in
// CompiledModel's / TensorBuffer's companion; TF Lite's Interpreter through TensorFlowLite.init()),
// so on a machine without it the first use throws UnsatisfiedLinkError and every later use
// NoClassDefFoundError. The stand-ins do exactly that unless a test installs a [StandInBackend]:
// then the "native" side is the backend (jvm/AndroidCheck.kt: LiteRT's C API through JNA).
@file:Suppress("unused")

package edgem3.standin

import java.nio.ByteBuffer

/** One tensor of a model signature, as the runtime sees it: dtype is the manifest's spelling. */
class StandInTensor(val name: String, val shape: IntArray, val dtype: String) {
    /** Bytes per element of `dtype` (what the runtime allocates). */
    val elementBytes: Int get() = when (dtype) {
        "int64" -> 8
        "int8", "uint8", "bool" -> 1
        "int16" -> 2
        else -> 4
    }
    val elements: Int get() = shape.fold(1) { a, b -> a * b }
}

class StandInSignature(val key: String, val inputs: List<StandInTensor>, val outputs: List<StandInTensor>)

/** A model the backend could read: its signatures (model order) and a run on raw tensor bytes. */
class StandInModel(
    val signatures: List<StandInSignature>,
    val run: (signature: String, inputs: Map<String, ByteArray>) -> Map<String, ByteArray>,
    val close: () -> Unit = {}
)

/** Thrown by a backend for bytes that are not a model it can read. */
class StandInUnreadable(message: String) : Exception(message)

interface StandInBackend {
    /** The model in `bytes` (a file's mapping or an asset's copy), or [StandInUnreadable]. */
    fun open(bytes: ByteBuffer): StandInModel
}

/**
 * A failure the real runtimes can raise on the kit's path, raised by the stand-ins on demand
 * (jvm/ApiCheck.kt's `runtime-*` cases set [StandInRuntime.fault]), each where and as the real one
 * raises it (LiteRT v2.2.0 sources, cited in LiteRtStubs.kt and TfliteStubs.kt).
 */
enum class StandInFault {
    /** A tensor buffer's host memory (LiteRT: createInput/OutputBuffer). */
    BUFFER_ALLOCATION,

    /** Preparing the tensors at a run (LiteRT: CompiledModel.run; TF Lite: runSignature's AllocateTensors). */
    TENSOR_ALLOCATION,

    /** The model's invoke (LiteRT: CompiledModel.run; TF Lite: runSignature). */
    INVOKE
}

object StandInRuntime {
    @Volatile
    var backend: StandInBackend? = null

    /** The failure every stand-in call that can raise it raises, while set. */
    @Volatile
    var fault: StandInFault? = null

    /**
     * Whether the app has LiteRT's GPU accelerator library (LiteRT >= 2.3: the litert-gpu artifact).
     * The desktop has none, as an app with litert alone: a GPU-only CompiledModel fails to compile.
     */
    @Volatile
    var gpuAccelerator: Boolean = false

    /** What the real class initializer does: load the JNI library (none here unless a backend is installed). */
    fun loadLibrary(name: String) {
        if (backend == null) System.loadLibrary(name)
    }

    fun open(bytes: ByteBuffer): StandInModel =
        (backend ?: throw UnsatisfiedLinkError("no stand-in backend")).open(bytes)
}
