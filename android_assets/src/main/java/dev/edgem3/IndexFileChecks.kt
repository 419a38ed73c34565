package dev.edgem3

import java.io.File
import java.io.RandomAccessFile
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.nio.FloatBuffer
import java.nio.IntBuffer
import java.nio.LongBuffer
import java.nio.ShortBuffer
import java.nio.channels.FileChannel

// The checks EdgeM3Index.open makes of a format-1 folder's files, beside it so that the index
// itself (its search) stays one file under 500 lines.

/** Every value finite and > 0 (NaN fails both comparisons). */
internal fun allPositive(x: FloatBuffer): Boolean {
    for (i in 0 until x.limit()) {
        val v = x.get(i)
        if (!(v > 0f && v < Float.POSITIVE_INFINITY)) return false
    }
    return true
}

/** Every float32 (by its bits) finite: an exponent of all ones is inf or NaN. */
internal fun allFinite(bits: IntBuffer): Boolean {
    for (i in 0 until bits.limit()) if (bits.get(i) and 0x7f800000 == 0x7f800000) return false
    return true
}

/** Every float16 (by its bits) finite: an exponent of all ones is inf or NaN. */
internal fun allFinite(bits: ShortBuffer): Boolean {
    for (i in 0 until bits.limit()) if (bits.get(i).toInt() and 0x7c00 == 0x7c00) return false
    return true
}

internal fun checkOffsets(o: LongBuffer, total: Long, where: String) {
    var prev = 0L
    if (o.limit() == 0 || o.get(0) != 0L) throw EdgeM3Exception("$where: must start at 0; the index is corrupt")
    for (i in 0 until o.limit()) {
        val x = o.get(i)
        if (x < prev || x > total) throw EdgeM3Exception("$where: not ascending within 0..$total; the index is corrupt")
        prev = x
    }
    if (prev != total) throw EdgeM3Exception("$where: must end at $total; the index is corrupt")
}

/** The file memory-mapped read-only (the mapping outlives the closed channel). */
internal fun mapFile(f: File): ByteBuffer {
    RandomAccessFile(f, "r").use { raf ->
        val size = raf.length()
        if (size > Int.MAX_VALUE) throw EdgeM3Exception("$f: over 2 GiB, more than one mapping holds; split the corpus")
        return raf.channel.map(FileChannel.MapMode.READ_ONLY, 0, size).order(ByteOrder.LITTLE_ENDIAN)
    }
}

/** `block`, which reads an index's files: its refusals of the plain kind (a check's, a JSON helper's)
 *  rethrown as [EdgeM3CorruptIndexException] (kind corrupt_index), the message kept. */
internal inline fun <T> corruptIndex(block: () -> T): T = try {
    block()
} catch (e: EdgeM3Exception) {
    throw if (e.kind == EdgeM3ErrorKind.INVALID_INPUT) EdgeM3CorruptIndexException(e.message ?: "", e.cause) else e
}

/** `bytes` as UTF-8, refused when they are not (issue 38: index.json's bad bytes were read as U+FFFD
 *  here while Python and Swift refused the file). */
internal fun strictUtf8(bytes: ByteArray, where: String): String = try {
    Charsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(bytes)).toString()
} catch (e: java.nio.charset.CharacterCodingException) {
    throw EdgeM3Exception("$where: not valid UTF-8")
}
