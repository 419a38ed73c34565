// Compile-only stand-ins (see AndroidStubs.kt).
@file:Suppress("unused", "UNUSED_PARAMETER")

package org.tensorflow.lite

import java.nio.ByteBuffer

class Interpreter(byteBuffer: ByteBuffer, options: Options?) : AutoCloseable {
    class Options {
        fun setNumThreads(numThreads: Int): Options = throw UnsupportedOperationException("stub")
        fun setUseXNNPACK(useXNNPACK: Boolean): Options = throw UnsupportedOperationException("stub")
    }

    val signatureKeys: Array<String> get() = throw UnsupportedOperationException("stub")  // getSignatureKeys()

    fun runSignature(inputs: Map<String, Any>, outputs: Map<String, Any>, signatureKey: String): Unit =
        throw UnsupportedOperationException("stub")

    override fun close(): Unit = throw UnsupportedOperationException("stub")
}
