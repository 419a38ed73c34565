// Stand-ins for android.content.res.AssetManager and AssetFileDescriptor, declared from the
// Android API reference (developer.android.com/reference/android/content/res/AssetManager,
// .../AssetFileDescriptor; API level 37): only the members the kit uses. The AOSP source
// (frameworks/base core/java/android/content/res/AssetManager.java) was not read here.
// Behaviour kept: assets live inside one file (the APK), so openFd gives that file's descriptor
// with the asset's startOffset and length; a missing asset is FileNotFoundException; a compressed
// one cannot be opened as a descriptor (FileNotFoundException, "... it is probably compressed")
// but open() still streams it. The public constructor below is the stand-in's own (the real class
// has none): it packs `root`'s files into one APK-like file, `compressed` marking which are deflated.
@file:Suppress("unused", "UNUSED_PARAMETER")

package android.content.res

import java.io.Closeable
import java.io.File
import java.io.FileDescriptor
import java.io.FileInputStream
import java.io.FileNotFoundException
import java.io.InputStream
import java.io.RandomAccessFile

class AssetFileDescriptor internal constructor(
    private val stream: FileInputStream,
    val startOffset: Long,  // getStartOffset()
    val declaredLength: Long  // getDeclaredLength()
) : Closeable {
    val fileDescriptor: FileDescriptor get() = stream.fd  // getFileDescriptor()
    val length: Long get() = declaredLength  // getLength(): the declared length when known

    override fun close() = stream.close()
}

class AssetManager(root: File, private val compressed: Set<String> = setOf()) {
    private class Entry(val offset: Long, val length: Long)

    private val apk: File = File.createTempFile("standin-", ".apk").also { it.deleteOnExit() }
    private val entries = LinkedHashMap<String, Entry>()

    init {
        RandomAccessFile(apk, "rw").use { out ->
            out.write(ByteArray(HEADER))  // assets never start at offset 0 of an APK
            root.walkTopDown().filter { it.isFile }.sortedBy { it.path }.forEach { f ->
                val name = f.relativeTo(root).invariantSeparatorsPath
                entries[name] = Entry(out.filePointer, f.length())
                f.inputStream().use { it.copyTo(FileOutputStreamAt(out)) }
                out.write(ByteArray(GAP))
            }
        }
    }

    private class FileOutputStreamAt(private val out: RandomAccessFile) : java.io.OutputStream() {
        override fun write(b: Int) = out.write(b)
        override fun write(b: ByteArray, off: Int, len: Int) = out.write(b, off, len)
    }

    private fun entry(fileName: String): Entry = entries[fileName] ?: throw FileNotFoundException(fileName)

    fun open(fileName: String): InputStream {
        val e = entry(fileName)
        val raf = RandomAccessFile(apk, "r")
        raf.seek(e.offset)
        return object : InputStream() {
            private var left = e.length
            override fun read(): Int = if (left <= 0) -1 else raf.read().also { left-- }
            override fun read(b: ByteArray, off: Int, len: Int): Int {
                if (left <= 0) return -1
                val n = raf.read(b, off, minOf(len.toLong(), left).toInt())
                if (n > 0) left -= n
                return n
            }
            override fun close() = raf.close()
        }
    }

    fun openFd(fileName: String): AssetFileDescriptor {
        val e = entry(fileName)
        if (fileName in compressed) {
            throw FileNotFoundException("This file can not be opened as a file descriptor; it is probably compressed")
        }
        return AssetFileDescriptor(FileInputStream(apk), e.offset, e.length)
    }

    /** The stand-in's APK file (for checks: a model mapped from it is mapped, not copied). */
    val apkFile: File get() = apk

    companion object {
        private const val HEADER = 4096
        private const val GAP = 512
    }
}
