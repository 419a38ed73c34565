// Stand-ins for LiteRT's Kotlin API as the kit calls it, declared from reading the real source:
// google-ai-edge/LiteRT tag v2.2.0 (the version build.gradle.kts pins),
// litert/kotlin/src/main/kotlin/com/google/ai/edge/litert/{Common.kt, LiteRtException.kt, Model.kt,
// TensorBuffer.kt} and the JNI behind them, litert/kotlin/src/main/jni/litert_compiled_model_jni.cc,
// litert_tensor_buffer_jni.cc, litert/cc/litert_compiled_model.h, litert_tensor_buffer.h.
// Only the members the kit uses are declared, with the real names, parameters and defaults.
// Behaviour kept where the kit depends on it (the "native" side is edgem3.standin.StandInRuntime):
// - the class initializer loads litert_jni: without it, UnsatisfiedLinkError, then NoClassDefFoundError;
// - a signature or tensor name the model lacks: LiteRtException(ErrorNotFound, "Signature not found" /
//   "Input tensor not found" / "Output tensor not found") from createInput/OutputBuffer and the type getters;
// - TensorBuffer is raw host memory sized by the tensor's element type: writeInt fails only when the
//   data is larger than the buffer (TensorBuffer::Write), readFloat reads the tensor's element count
//   as float32 whatever the element type (ReadImp): a dtype mismatch is not an error, it is garbage;
// - run(Map, Map, signature) resolves buffers by tensor name ("Failed to find input/output");
// - any call after close(): IllegalStateException("The handle has been destroyed.") (JniHandle);
// - create(assetManager, name): AAssetManager_open + a copy of the whole asset into native memory
//   (OwningBufferRef(const uint8_t*, size) memcpy); a missing asset: LiteRtException(ErrorNotFound);
// - a tensor whose element type the Kotlin enum lacks (float16, int16, uint8...): get*TensorType throws
//   LiteRtException(ErrorUnsupported, "Unsupported element type in Kotlin") (ToJavaElementType);
//   createInput/OutputBuffer still works (host memory of the tensor's size);
// - on demand (StandInRuntime.fault): a buffer's host memory fails (tensor_buffer.cc,
//   ErrorRuntimeFailure "Failed to allocate aligned memory"), a run's tensor allocation fails
//   (compiled_model.cc, ErrorRuntimeFailure "Failed to allocate tensors"), the invoke fails
//   (compiled_model.cc, ErrorRuntimeFailure "Failed to invoke");
// - a GPU-only CompiledModel without the GPU accelerator library (StandInRuntime.gpuAccelerator false;
//   from LiteRT 2.3 it is the litert-gpu artifact): no accelerator takes an op and the CPU is not in
//   the set, so compilation fails (compiled_model.cc, ErrorCompilation "Some ops are not accelerated...").
@file:Suppress("unused", "UNUSED_PARAMETER")

package com.google.ai.edge.litert

import android.content.res.AssetManager
import edgem3.standin.StandInFault
import edgem3.standin.StandInModel
import edgem3.standin.StandInRuntime
import edgem3.standin.StandInSignature
import edgem3.standin.StandInTensor
import edgem3.standin.StandInUnreadable
import java.io.File
import java.io.RandomAccessFile
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.nio.channels.FileChannel
import java.util.concurrent.atomic.AtomicBoolean

/** Common.kt */
enum class Accelerator private constructor(val value: Int) {
    NONE(0),
    CPU(1),
    GPU(2),
    NPU(3)
}

/** Common.kt: the real constructor is internal(handle: Long). */
abstract class JniHandle internal constructor(internal val handle: Long) : AutoCloseable {
    private val destroyed = AtomicBoolean(false)

    protected fun assertNotDestroyed() {
        if (destroyed.get()) throw IllegalStateException("The handle has been destroyed.")
    }

    protected abstract fun destroy()

    final override fun close() {
        if (destroyed.compareAndSet(false, true)) destroy()
    }
}

/** LiteRtException.kt: every code of the real enum (litert_common.h's), in its order. */
enum class Status(val code: Int) {
    Ok(0),
    ErrorInvalidArgument(1),
    ErrorMemoryAllocationFailure(2),
    ErrorRuntimeFailure(3),
    ErrorMissingInputTensor(4),
    ErrorUnsupported(5),
    ErrorNotFound(6),
    ErrorTimeoutExpired(7),
    ErrorWrongVersion(8),
    ErrorUnknown(9),
    ErrorAlreadyExists(10),
    ErrorCancelled(11),
    ErrorFileIO(500),
    ErrorInvalidFlatbuffer(501),
    ErrorDynamicLoading(502),
    ErrorSerialization(503),
    ErrorCompilation(504),
    ErrorIndexOOB(1000),
    ErrorInvalidIrType(1001),
    ErrorInvalidGraphInvariant(1002),
    ErrorGraphModification(1003),
    ErrorInvalidToolConfig(1500),
    LegalizeNoMatch(2000),
    ErrorInvalidLegalization(2001),
    PatternNoMatch(3000),
    ErrorInvalidTransformation(3001),
    ErrorUnsupportedRuntimeVersion(4000),
    ErrorUnsupportedCompilerVersion(4001),
    ErrorIncompatibleByteCodeVersion(4002),
    ErrorUnsupportedShapeInferencedOp(5000),
    ErrorShapeInferenceFailed(5001);

    companion object {
        fun fromCode(code: Int): Status =
            requireNotNull(values().firstOrNull { it.code == code }) { "Unknown status code: $code" }
    }
}

/** LiteRtException.kt: the status is private (a caller sees the message only). */
class LiteRtException(private val status: Status, message: String) : Exception(message) {
    constructor(code: Int, message: String) : this(Status.fromCode(code), message)
}

/** Environment.kt (the kit lets CompiledModel.create make and own one: optionalEnv = null). */
class Environment private constructor() : JniHandle(0L) {
    enum class Option private constructor(val value: Int) {
        CompilerPluginLibraryDir(0),
        DispatchLibraryDir(1)
    }

    override fun destroy() {}

    companion object {
        init {
            StandInRuntime.loadLibrary("litert_jni")
        }

        @Throws(LiteRtException::class)
        @JvmStatic
        fun create(options: Map<Option, String> = mapOf()): Environment = Environment()
    }
}

/** Model.kt */
data class TensorType(val elementType: ElementType, val layout: Layout? = null) {
    enum class ElementType { INT, FLOAT, INT8, BOOLEAN, INT64 }

    data class Layout(val dimensions: List<Int>, val strides: List<Int> = listOf()) {
        val rank: Int get() = dimensions.size
    }
}

/** TensorBuffer.kt: host memory of the tensor's byte size (little-endian, as on ARM and x86). */
class TensorBuffer internal constructor(internal val tensor: StandInTensor) : JniHandle(0L) {
    internal val bytes = if (StandInRuntime.fault == StandInFault.BUFFER_ALLOCATION) {
        throw LiteRtException(Status.ErrorRuntimeFailure, "Failed to allocate aligned memory")
    } else {
        ByteArray(tensor.elements * tensor.elementBytes)
    }

    @Throws(LiteRtException::class)
    fun writeInt(data: IntArray) {
        assertNotDestroyed()
        if (bytes.size < 4 * data.size) {
            throw LiteRtException(Status.ErrorRuntimeFailure, "TensorBuffer host memory buffer size is smaller than " +
                "the given data size, ${bytes.size} vs ${4 * data.size}")
        }
        ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().put(data)
    }

    @Throws(LiteRtException::class)
    fun readFloat(): FloatArray {
        assertNotDestroyed()
        val out = FloatArray(tensor.elements)
        val view = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
        for (i in out.indices) out[i] = if (4 * i + 4 <= bytes.size) view.getFloat(4 * i) else 0f
        return out
    }

    override fun destroy() {}
}

/** Model.kt */
class CompiledModel private constructor(private val model: StandInModel) : JniHandle(0L) {
    data class CpuOptions(
        val numThreads: Int? = null,
        val xnnPackFlags: Int? = null,
        val xnnPackWeightCachePath: String? = null
    )

    class Options(internal val accelerators: Set<Accelerator>) {
        constructor(vararg accelerators: Accelerator) : this(setOf(*accelerators))

        var cpuOptions: CpuOptions? = null

        companion object {
            @JvmStatic
            val CPU = Options(Accelerator.CPU)
        }
    }

    /** The signature by key; "" is the model's first (the real API's default). */
    private fun signature(key: String): StandInSignature =
        (if (key == "") model.signatures.firstOrNull() else model.signatures.firstOrNull { it.key == key })
            ?: throw LiteRtException(Status.ErrorNotFound, "Signature not found")

    private fun input(name: String, signature: String): StandInTensor =
        signature(signature).inputs.firstOrNull { it.name == name }
            ?: throw LiteRtException(Status.ErrorNotFound, "Input tensor not found")

    private fun output(name: String, signature: String): StandInTensor =
        signature(signature).outputs.firstOrNull { it.name == name }
            ?: throw LiteRtException(Status.ErrorNotFound, "Output tensor not found")

    @Throws(LiteRtException::class)
    fun createInputBuffer(inputName: String, signature: String = ""): TensorBuffer {
        assertNotDestroyed()
        return TensorBuffer(input(inputName, signature))
    }

    @Throws(LiteRtException::class)
    fun createOutputBuffer(outputName: String, signature: String = ""): TensorBuffer {
        assertNotDestroyed()
        return TensorBuffer(output(outputName, signature))
    }

    @Throws(LiteRtException::class)
    fun createInputBuffers(signature: String): List<TensorBuffer> {
        assertNotDestroyed()
        return signature(signature).inputs.map { TensorBuffer(it) }
    }

    @Throws(LiteRtException::class)
    fun createOutputBuffers(signature: String): List<TensorBuffer> {
        assertNotDestroyed()
        return signature(signature).outputs.map { TensorBuffer(it) }
    }

    @Throws(LiteRtException::class)
    fun run(inputs: Map<String, TensorBuffer>, outputs: Map<String, TensorBuffer>, signature: String = "") {
        assertNotDestroyed()
        val s = signature(signature)
        for (name in inputs.keys) if (s.inputs.none { it.name == name }) throw LiteRtException(Status.ErrorNotFound, "Failed to find input")
        for (name in outputs.keys) if (s.outputs.none { it.name == name }) throw LiteRtException(Status.ErrorNotFound, "Failed to find output")
        for (t in s.inputs) if (inputs[t.name] == null) throw LiteRtException(Status.ErrorNotFound, "Failed to find input")
        when (StandInRuntime.fault) {
            StandInFault.TENSOR_ALLOCATION -> throw LiteRtException(Status.ErrorRuntimeFailure, "Failed to allocate tensors")
            StandInFault.INVOKE -> throw LiteRtException(Status.ErrorRuntimeFailure, "Failed to invoke")
            else -> {}
        }
        val produced = model.run(s.key, inputs.mapValues { it.value.bytes.copyOf() })
        for ((name, buffer) in outputs) {
            val data = produced[name] ?: continue
            System.arraycopy(data, 0, buffer.bytes, 0, minOf(data.size, buffer.bytes.size))
        }
    }

    fun getInputTensorType(inputName: String, signature: String = ""): TensorType {
        assertNotDestroyed()
        return typeOf(input(inputName, signature))
    }

    fun getOutputTensorType(outputName: String, signature: String = ""): TensorType {
        assertNotDestroyed()
        return typeOf(output(outputName, signature))
    }

    override fun destroy() = model.close()

    companion object {
        init {
            StandInRuntime.loadLibrary("litert_jni")
        }

        private fun typeOf(t: StandInTensor): TensorType {
            val element = when (t.dtype) {
                "float32" -> TensorType.ElementType.FLOAT
                "int32" -> TensorType.ElementType.INT
                "int64" -> TensorType.ElementType.INT64
                "int8" -> TensorType.ElementType.INT8
                "bool" -> TensorType.ElementType.BOOLEAN
                else -> throw LiteRtException(Status.ErrorUnsupported, "Unsupported element type in Kotlin")
            }
            return TensorType(element, TensorType.Layout(t.shape.toList()))
        }

        private fun load(bytes: ByteBuffer, options: Options): CompiledModel {
            val model = try {
                StandInRuntime.open(bytes)
            } catch (exc: StandInUnreadable) {
                throw LiteRtException(Status.ErrorInvalidFlatbuffer, "Failed to build model from buffer: ${exc.message}")
            }
            val accelerators = options.accelerators
            if (Accelerator.GPU in accelerators && !StandInRuntime.gpuAccelerator && Accelerator.CPU !in accelerators) {
                model.close()
                throw LiteRtException(Status.ErrorCompilation, "Some ops are not accelerated. Add kLiteRtHwAcceleratorCpu to " +
                    "the compilation accelerator set to allow using the CPU to run those.")
            }
            return CompiledModel(model)
        }

        /** Copies the whole asset into native memory, then builds the model from that copy. */
        @Throws(LiteRtException::class)
        @JvmStatic
        fun create(
            assetManager: AssetManager,
            assetName: String,
            options: Options = Options.CPU,
            optionalEnv: Environment? = null
        ): CompiledModel {
            val copy = try {
                assetManager.open(assetName).use { it.readBytes() }
            } catch (exc: java.io.IOException) {
                throw LiteRtException(Status.ErrorNotFound, "Failed to open asset.")
            }
            return load(ByteBuffer.wrap(copy), options)
        }

        /** Maps the file (LiteRT's loader mmaps it read-only). */
        @Throws(LiteRtException::class)
        @JvmStatic
        fun create(filePath: String, options: Options = Options.CPU, optionalEnv: Environment? = null): CompiledModel {
            val file = File(filePath)
            if (!file.isFile) throw LiteRtException(Status.ErrorFileIO, "Failed to open file: $filePath")
            val mapped = RandomAccessFile(file, "r").use { it.channel.map(FileChannel.MapMode.READ_ONLY, 0, it.length()) }
            return load(mapped, options)
        }
    }
}
