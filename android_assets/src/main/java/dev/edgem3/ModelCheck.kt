package dev.edgem3

import java.io.File
import java.io.InputStream
import java.security.MessageDigest

/**
 * The model file against manifest.json's `files` entry: size on every load, SHA-256 on the first.
 *
 * Hashing the 568 MB int8 model reads every page once (about a second on a desktop JVM, README
 * "Integrity"), so success is remembered by an empty marker file named after the expected hash,
 * the size and a `stamp` that changes when the file may have (the APK's or the file's mtime).
 * Plain JVM (java.security, java.io): CI runs it (jvm/GoldenCheck.kt, jvm/Sha256Bench.kt).
 */
object ModelCheck {
    /** Lowercase hex SHA-256 of a stream, read in 1 MiB chunks (no whole-file copy). */
    fun sha256Hex(input: InputStream): String {
        val digest = MessageDigest.getInstance("SHA-256")
        val buffer = ByteArray(1 shl 20)
        while (true) {
            val n = input.read(buffer)
            if (n < 0) break
            digest.update(buffer, 0, n)
        }
        return hex(digest)
    }

    /** A finished digest as lowercase hex, as hashlib writes it in manifest.json. */
    fun hex(digest: MessageDigest): String = digest.digest().joinToString("") { "%02x".format(it) }

    /**
     * Throws when `size` or the stream's SHA-256 differ from `expected`; with a `memo` folder the
     * hash is skipped once a previous load succeeded. Returns whether it hashed. Blocking: call
     * it off the main thread (EdgeM3Embedder.load does).
     */
    fun verify(where: String, expected: FileEntry, size: Long, stamp: Long, memo: File?, open: () -> InputStream): Boolean {
        if (size != expected.size) {
            throw EdgeM3CorruptBundleException("$where: $size bytes, manifest.json says ${expected.size}; copy the bundle again (make build)")
        }
        val marker = if (memo == null) null else File(memo, "edge_m3-verified-${expected.sha256}-$size-$stamp")
        if (marker != null && marker.isFile) return false
        val actual = open().use { sha256Hex(it) }
        if (actual != expected.sha256) {  // hashlib writes lowercase hex
            throw EdgeM3CorruptBundleException("$where: sha256 $actual, manifest.json says ${expected.sha256}; copy the bundle again (make build)")
        }
        if (marker != null) {
            try {
                marker.parentFile?.mkdirs()
                marker.createNewFile()
            } catch (exc: java.io.IOException) {
                // Best effort: without the marker the next load hashes again.
            }
        }
        return true
    }
}
