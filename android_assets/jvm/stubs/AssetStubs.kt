// Compile-only stand-ins (see AndroidStubs.kt).
@file:Suppress("unused", "UNUSED_PARAMETER")

package android.content.res

import java.io.Closeable
import java.io.FileDescriptor
import java.io.InputStream

class AssetFileDescriptor : Closeable {
    val fileDescriptor: FileDescriptor get() = throw UnsupportedOperationException("stub")  // getFileDescriptor()
    val startOffset: Long get() = throw UnsupportedOperationException("stub")  // getStartOffset()
    val declaredLength: Long get() = throw UnsupportedOperationException("stub")  // getDeclaredLength()
    override fun close(): Unit = throw UnsupportedOperationException("stub")
}

class AssetManager {
    fun open(fileName: String): InputStream = throw UnsupportedOperationException("stub")
    fun openFd(fileName: String): AssetFileDescriptor = throw UnsupportedOperationException("stub")
}
