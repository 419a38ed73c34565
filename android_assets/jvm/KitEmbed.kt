// JVM-only command line (not part of the app): the Kotlin kit embeds a file of texts live, the
// model on LiteRT's C API (LiteRtCRunner through JNA). The Kotlin side of tools/kit/kit_embed.sh.
//
//   java -cp kit.jar:jna.jar dev.edgem3.KitEmbedKt [--bench] [--repeats N] [--threads N] --lib LIBLITERT BUNDLE TEXTS_FILE
//
// Without --bench: for each line of the UTF-8 file (split on "\n" only) one JSON object with the
// keys of `edge-m3 embed BUNDLE --texts FILE` (its JSON lines on stdout): input_ids, signature, dense_vecs, lexical_weights,
// colbert_vecs (the heads the bundle exports). With --bench: one JSON line
//   {"open_to_first_ms": X, "p50_ms": {"<seq_len>": X}, "runs": {"<seq_len>": N}}
// open_to_first_ms: manifest, checksums, tokenizer, model open and the first line's embed;
// p50_ms: the whole embed call (tokenize + run + post-process) per signature length, each line
// embedded N times (default 20) after 3 warm-ups. --threads: XNNPACK threads, default
// LiteRtCRunner.DEFAULT_THREADS (1, as `edge-m3 embed`). Bad input: one line on stderr, exit 2.
package dev.edgem3

import java.io.Closeable
import java.io.File
import kotlin.system.exitProcess

private const val EMBED_USAGE = "usage: KitEmbed [--bench] [--repeats N] [--threads N] --lib LIBLITERT BUNDLE TEXTS_FILE"
private const val WARMUPS = 3

/** A bundle opened for embedding on the desktop: LocalBundle (as EdgeM3Embedder.fromDirectory) on LiteRtCRunner. */
private class DesktopBundle(dir: File, lib: String, threads: Int) : Closeable {
    val bundle = LocalBundle.open(dir)  // every listed file's size and SHA-256 first, as `edge-m3 embed`
    val runner = LiteRtCRunner.open(lib, bundle.modelFile, bundle.model.signatures, threads)

    fun embed(text: String): Embedding = EdgeM3Core.embed(text, bundle.manifest, bundle.model, bundle.tokenizer, runner)

    override fun close() = runner.close()
}

private fun jsonString(s: String): String {
    val out = StringBuilder("\"")
    for (ch in s) {
        when {
            ch == '"' -> out.append("\\\"")
            ch == '\\' -> out.append("\\\\")
            ch < ' ' -> out.append("\\u%04x".format(ch.code))
            else -> out.append(ch)
        }
    }
    return out.append('"').toString()
}

private fun jsonFloat(x: Float): String {
    if (x.isNaN() || x.isInfinite()) throw EdgeM3Exception("a live output is $x")
    return x.toString()  // the shortest text that reads back as this float32
}

private fun jsonVector(v: FloatArray): String = v.joinToString(", ", "[", "]") { jsonFloat(it) }

/** One result as `edge-m3 embed` writes it (edge_m3.runtime.pipeline.to_jsonable). */
private fun embeddingJson(e: Embedding): String {
    val parts = ArrayList<String>()
    parts.add("${jsonString(EdgeM3Contract.INPUT_IDS)}: ${e.inputIds.joinToString(", ", "[", "]")}")
    parts.add("\"signature\": ${jsonString(e.signature)}")
    e.denseVecs?.let { parts.add("${jsonString(EdgeM3Contract.DENSE_VECS)}: ${jsonVector(it)}") }
    e.lexicalWeights?.let { w ->
        parts.add("${jsonString(EdgeM3Contract.LEXICAL_WEIGHTS)}: " +
            w.entries.joinToString(", ", "{", "}") { "${jsonString(it.key)}: ${jsonFloat(it.value)}" })
    }
    e.colbertVecs?.let { m ->
        parts.add("${jsonString(EdgeM3Contract.COLBERT_VECS)}: " + m.joinToString(", ", "[", "]") { jsonVector(it) })
    }
    return parts.joinToString(", ", "{", "}")
}

private fun median(xs: List<Double>): Double {
    val s = xs.sorted()
    return if (s.size % 2 == 1) s[s.size / 2] else (s[s.size / 2 - 1] + s[s.size / 2]) / 2
}

private fun bench(t0: Long, bundleDir: File, lib: String, threads: Int, lines: List<String>, repeats: Int): String {
    if (lines.isEmpty()) throw UsageError("no texts to time")
    val times = LinkedHashMap<Int, MutableList<Double>>()
    DesktopBundle(bundleDir, lib, threads).use { b ->
        b.embed(lines[0])
        val openMs = (System.nanoTime() - t0) / 1e6
        for (line in lines) {
            for (i in 0 until WARMUPS) b.embed(line)
            for (i in 0 until repeats) {
                val s = System.nanoTime()
                val e = b.embed(line)
                val ms = (System.nanoTime() - s) / 1e6
                times.getOrPut(b.bundle.model.signature(e.signature).seqLen) { ArrayList() }.add(ms)
            }
        }
        val lens = times.keys.sorted()
        return "{\"open_to_first_ms\": ${"%.3f".format(openMs)}, \"p50_ms\": " +
            lens.joinToString(", ", "{", "}") { "\"$it\": ${"%.3f".format(median(times.getValue(it)))}" } +
            ", \"runs\": " + lens.joinToString(", ", "{", "}") { "\"$it\": ${times.getValue(it).size}" } + "}"
    }
}

fun main(args: Array<String>) {
    val t0 = System.nanoTime()
    try {
        val rest = args.toMutableList()
        val isBench = rest.remove("--bench")
        var repeats = 20
        var threads = LiteRtCRunner.DEFAULT_THREADS
        var lib: String? = null
        while (true) {
            val at = rest.indexOfFirst { it == "--repeats" || it == "--threads" || it == "--lib" }
            if (at < 0) break
            val flag = rest[at]
            val value = rest.getOrNull(at + 1) ?: throw UsageError("$flag needs a value; $EMBED_USAGE")
            if (flag == "--lib") {
                lib = value
            } else {
                val n = value.toIntOrNull()?.takeIf { it >= 1 } ?: throw UsageError("$flag $value: must be a whole number >= 1")
                if (flag == "--repeats") repeats = n else threads = n
            }
            rest.subList(at, at + 2).clear()
        }
        if (lib == null || rest.size != 2 || rest.any { it.startsWith("--") }) throw UsageError(EMBED_USAGE)
        val bundleDir = File(rest[0])
        val lines = readLines(File(rest[1]))
        val out = if (isBench) {
            bench(t0, bundleDir, lib, threads, lines, repeats) + "\n"
        } else {
            val sb = StringBuilder()
            DesktopBundle(bundleDir, lib, threads).use { b -> for (line in lines) sb.append(embeddingJson(b.embed(line))).append('\n') }
            sb.toString()
        }
        System.out.write(out.toByteArray(Charsets.UTF_8))
        System.out.flush()
    } catch (exc: UsageError) {
        System.err.println("kit_embed: ${exc.message}")
        exitProcess(2)
    } catch (exc: EdgeM3Exception) {
        System.err.println("kit_embed: ${exc.message}")
        exitProcess(2)
    } catch (exc: NoClassDefFoundError) {
        System.err.println("kit_embed: JNA is not on the class path (${exc.message}): apt-get install -y libjna-java, " +
            "or set EDGE_M3_JNA_JAR")
        exitProcess(2)
    }
}
