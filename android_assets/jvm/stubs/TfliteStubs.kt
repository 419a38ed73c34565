// Stand-in for TF Lite's Interpreter as LiteRT's AAR ships it, declared from reading the real
// source: google-ai-edge/LiteRT tag v2.2.0, litert/kotlin/src/copied_from_tflite/java/org/tensorflow/
// lite/Interpreter.java and tflite/java/src/main/java/org/tensorflow/lite/{InterpreterApi.java,
// InterpreterImpl.java, NativeInterpreterWrapper.java, NativeSignatureRunnerWrapper.java, Tensor.java,
// DataType.java, TensorFlowLite.java}. Only the members the kit uses. Behaviour kept:
// - TensorFlowLite.init(): no native library -> UnsatisfiedLinkError (then NoClassDefFoundError);
// - the model ByteBuffer must be a MappedByteBuffer or a direct native-order one, else
//   IllegalArgumentException("Model ByteBuffer should be either a MappedByteBuffer ...");
// - signatures are looked up by key, tensors by their signature names: unknown ones give
//   IllegalArgumentException("Input error: Signature K not found." / "input N not found." / "output N not found.");
// - any call after close(): IllegalStateException("Internal error: The Interpreter has already been closed.");
// - a tensor of a type the Java enum lacks (float16...): IllegalArgumentException("DataType error: DataType N is
//   not recognized in Java.") when the tensor is fetched (DataTypeUtils.fromC, through TensorImpl);
// - on demand (StandInRuntime.fault), runSignature's native side (nativesignaturerunner_jni.cc):
//   IllegalStateException("Internal error: Unexpected failure when preparing tensor allocations: ...") and
//   IllegalStateException("Internal error: Failed to run on the given Interpreter: ...").
@file:Suppress("unused", "UNUSED_PARAMETER")

package org.tensorflow.lite

import edgem3.standin.StandInFault
import edgem3.standin.StandInModel
import edgem3.standin.StandInRuntime
import edgem3.standin.StandInSignature
import edgem3.standin.StandInTensor
import edgem3.standin.StandInUnreadable
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.nio.MappedByteBuffer

/** DataType.java */
enum class DataType(private val value: Int) {
    FLOAT32(1),
    INT32(2),
    UINT8(3),
    INT64(4),
    STRING(5),
    BOOL(6),
    INT16(7),
    INT8(9)
}

/** Tensor.java (the accessors the kit reads). */
interface Tensor {
    fun dataType(): DataType
    fun shape(): IntArray
    fun numElements(): Int
    fun name(): String
}

class Interpreter(byteBuffer: ByteBuffer, options: Options?) : AutoCloseable {
    class Options {
        fun setNumThreads(numThreads: Int): Options = this
        fun setUseXNNPACK(useXNNPACK: Boolean): Options = this
    }

    private var model: StandInModel? = null

    init {
        StandInRuntime.loadLibrary("tensorflowlite_jni")  // TensorFlowLite.init(): throws on every call while missing
        if (!(byteBuffer is MappedByteBuffer) && (!byteBuffer.isDirect || byteBuffer.order() != ByteOrder.nativeOrder())) {
            throw IllegalArgumentException("Model ByteBuffer should be either a MappedByteBuffer of the model file, or a " +
                "direct ByteBuffer using ByteOrder.nativeOrder() which contains bytes of model content.")
        }
        model = try {
            StandInRuntime.open(byteBuffer)
        } catch (exc: StandInUnreadable) {
            throw IllegalArgumentException("ByteBuffer is not a valid TensorFlow Lite model flatbuffer")
        }
    }

    private fun open(): StandInModel =
        model ?: throw IllegalStateException("Internal error: The Interpreter has already been closed.")

    private fun signature(key: String): StandInSignature =
        open().signatures.firstOrNull { it.key == key }
            ?: throw IllegalArgumentException("Input error: Signature $key not found.")

    private class StandInTensorView(private val t: StandInTensor) : Tensor {
        // TensorImpl resolves its DataType when it is made: a type the enum lacks fails there.
        private val type = when (t.dtype) {
            "float32" -> DataType.FLOAT32
            "int32" -> DataType.INT32
            "int64" -> DataType.INT64
            "int8" -> DataType.INT8
            "uint8" -> DataType.UINT8
            "int16" -> DataType.INT16
            "bool" -> DataType.BOOL
            "string" -> DataType.STRING
            else -> throw IllegalArgumentException("DataType error: DataType ${C_TYPES[t.dtype] ?: 0} is not recognized in Java.")
        }

        override fun dataType(): DataType = type

        override fun shape(): IntArray = t.shape.copyOf()
        override fun numElements(): Int = t.elements
        override fun name(): String = t.name
    }

    val signatureKeys: Array<String> get() = open().signatures.map { it.key }.toTypedArray()  // getSignatureKeys()

    fun getSignatureInputs(signatureKey: String): Array<String> = signature(signatureKey).inputs.map { it.name }.toTypedArray()

    fun getSignatureOutputs(signatureKey: String): Array<String> = signature(signatureKey).outputs.map { it.name }.toTypedArray()

    fun getInputTensorFromSignature(inputName: String, signatureKey: String): Tensor =
        StandInTensorView(signature(signatureKey).inputs.firstOrNull { it.name == inputName }
            ?: throw IllegalArgumentException("Input error: input $inputName not found."))

    fun getOutputTensorFromSignature(outputName: String, signatureKey: String): Tensor =
        StandInTensorView(signature(signatureKey).outputs.firstOrNull { it.name == outputName }
            ?: throw IllegalArgumentException("Input error: output $outputName not found."))

    /** Inputs and outputs as direct ByteBuffers (the kit's only kind), by signature tensor name. */
    fun runSignature(inputs: Map<String, Any>, outputs: Map<String, Any>, signatureKey: String) {
        val m = open()
        if (inputs.isEmpty()) throw IllegalArgumentException("Input error: Inputs should not be null or empty.")
        val s = signature(signatureKey)
        val bytes = LinkedHashMap<String, ByteArray>()
        for ((name, value) in inputs) {
            val t = s.inputs.firstOrNull { it.name == name } ?: throw IllegalArgumentException("Input error: input $name not found.")
            val b = (value as ByteBuffer).duplicate()
            b.rewind()
            if (b.remaining() != t.elements * t.elementBytes) {
                throw IllegalArgumentException("Cannot copy to a TensorFlowLite tensor ($name) with ${t.elements * t.elementBytes} " +
                    "bytes from a Java Buffer with ${b.remaining()} bytes.")
            }
            bytes[name] = ByteArray(b.remaining()).also { b.get(it) }
        }
        when (StandInRuntime.fault) {
            StandInFault.TENSOR_ALLOCATION -> throw IllegalStateException("Internal error: Unexpected failure when " +
                "preparing tensor allocations: stand-in")
            StandInFault.INVOKE -> throw IllegalStateException("Internal error: Failed to run on the given Interpreter: stand-in")
            else -> {}
        }
        val produced = m.run(s.key, bytes)
        for ((name, value) in outputs) {
            if (s.outputs.none { it.name == name }) throw IllegalArgumentException("Input error: output $name not found.")
            val b = value as ByteBuffer
            b.rewind()
            b.put(produced.getValue(name))
        }
    }

    override fun close() {
        model?.close?.invoke()
        model = null
    }

    private companion object {
        /** TfLiteType codes (tflite/core/c/c_api_types.h) of the types the Java enum lacks. */
        val C_TYPES = mapOf("float16" to 10, "complex64" to 8, "float64" to 11, "uint64" to 13, "uint32" to 16, "uint16" to 17)
    }
}
