// JVM-only measurement (not part of the app): the cost of ModelCheck's first-load SHA-256.
//
//   java -cp edge_m3_kit.jar dev.edgem3.Sha256BenchKt <file> [<expected sha256>]
//
// Prints "sha256 <hex> <bytes> bytes <seconds> s <MB/s> MB/s" (MB = 10^6 bytes); with an expected
// hash, runs ModelCheck.verify itself and exits 1 on a mismatch.

package dev.edgem3

import java.io.File
import kotlin.system.exitProcess

fun main(args: Array<String>) {
    if (args.isEmpty() || args.size > 2) {
        System.err.println("usage: Sha256BenchKt <file> [<expected sha256>]")
        exitProcess(2)
    }
    val file = File(args[0])
    val t0 = System.nanoTime()
    val hex = if (args.size == 2) {
        try {
            ModelCheck.verify(file.path, FileEntry(args[1], file.length()), file.length(), file.lastModified(), null) {
                file.inputStream()
            }
        } catch (exc: EdgeM3Exception) {
            System.err.println(exc.message)
            exitProcess(1)
        }
        args[1]
    } else {
        file.inputStream().use { ModelCheck.sha256Hex(it) }
    }
    val seconds = (System.nanoTime() - t0) / 1e9
    println("sha256 $hex ${file.length()} bytes ${"%.3f".format(seconds)} s ${"%.0f".format(file.length() / 1e6 / seconds)} MB/s")
}
