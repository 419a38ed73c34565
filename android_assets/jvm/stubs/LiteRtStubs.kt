// Compile-only stand-ins (see AndroidStubs.kt) for LiteRT's Kotlin API as the kit calls it:
// com.google.ai.edge.litert 2.x (litert/kotlin/src/main/kotlin/com/google/ai/edge/litert/ in
// google-ai-edge/LiteRT: Model.kt, TensorBuffer.kt, Common.kt, LiteRtException.kt).
@file:Suppress("unused", "UNUSED_PARAMETER")

package com.google.ai.edge.litert

enum class Accelerator { NONE, CPU, GPU, NPU }

class LiteRtException(message: String) : Exception(message)

abstract class JniHandle : AutoCloseable {
    final override fun close(): Unit = throw UnsupportedOperationException("stub")
}

class TensorBuffer : JniHandle() {
    fun writeInt(data: IntArray): Unit = throw UnsupportedOperationException("stub")
    fun readFloat(): FloatArray = throw UnsupportedOperationException("stub")
}

class CompiledModel private constructor() : JniHandle() {
    data class CpuOptions(
        val numThreads: Int? = null,
        val xnnPackFlags: Int? = null,
        val xnnPackWeightCachePath: String? = null
    )

    class Options(vararg accelerators: Accelerator) {
        var cpuOptions: CpuOptions? = null
    }

    fun createInputBuffer(inputName: String, signature: String = ""): TensorBuffer =
        throw UnsupportedOperationException("stub")

    fun createOutputBuffer(outputName: String, signature: String = ""): TensorBuffer =
        throw UnsupportedOperationException("stub")

    fun run(inputs: Map<String, TensorBuffer>, outputs: Map<String, TensorBuffer>, signature: String = ""): Unit =
        throw UnsupportedOperationException("stub")

    companion object {
        fun create(filePath: String, options: Options = Options(Accelerator.CPU)): CompiledModel =
            throw UnsupportedOperationException("stub")
    }
}
