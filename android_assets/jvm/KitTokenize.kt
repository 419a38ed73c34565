// JVM-only command line (not part of the app): the kit's tokenizer of the bundle's kind (EdgeM3Tokenizer)
// on a bundle, for CI and by hand.
//
//   java -cp kit.jar dev.edgem3.KitTokenizeKt BUNDLE TEXTS_FILE [--max-length N]
//       one JSON list of ids (the bundle's tokenizer kind) per line of the UTF-8 file (lines split on "\n" only)
//   ... --units BUNDLE FILE      lines "MAX HEX": MAX "-" or a length, HEX the text as UTF-16 code
//                                units (4 hex digits each, lone surrogates allowed); prints the ids
//                                or "error: <message>" per line (tests/test_kit_tokenizer.py)
//   ... --chunks BUNDLE FILE      lines "MAX OVERLAP HEX": MAX the largest signature length L,
//                                OVERLAP "-" (the default, CHUNK_OVERLAP_PERCENT) or a number, HEX
//                                as for --units; prints the text's chunks (encodeChunks) as one JSON
//                                list of id lists, or "error: <message>", per line
//   ... --bench BUNDLE TEXTS_FILE load time, then texts/s single-threaded after a JIT warm-up
//
// BUNDLE is a directory with manifest.json (its "tokenizer" entry is what is read) and the model
// file it names. tools/kit/kit_tokenize.sh wraps this. Bad input: one line on stderr, exit 2.
package dev.edgem3

import java.io.File
import java.nio.ByteBuffer
import java.nio.charset.CharacterCodingException
import java.nio.charset.CodingErrorAction
import kotlin.system.exitProcess

internal class UsageError(message: String) : RuntimeException(message)

private fun loadTokenizer(dir: File): EdgeM3Tokenizer {
    val manifestFile = File(dir, EdgeM3Contract.MANIFEST)
    if (!manifestFile.isFile) throw UsageError("$dir: not a bundle (no manifest.json)")
    val manifest = JsonTree.obj(MiniJson.parse(manifestFile.readText(Charsets.UTF_8)), EdgeM3Contract.MANIFEST)
    val spec = TokenizerSpec.fromJson(JsonTree.field(manifest, "tokenizer", EdgeM3Contract.MANIFEST))
    return LocalBundle.tokenizer(dir, spec)
}

/** The lines of a UTF-8 file, split on "\n" only (a final newline ends the last line). */
internal fun readLines(file: File): List<String> {
    if (!file.isFile) throw UsageError("$file: not found")
    val decoder = Charsets.UTF_8.newDecoder()
        .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
    val text: String = try {
        decoder.decode(ByteBuffer.wrap(file.readBytes())).toString()
    } catch (exc: CharacterCodingException) {
        throw UsageError("$file: not valid UTF-8")
    }
    if (text.length == 0) return emptyList()
    val lines = text.split("\n")
    return if (text.endsWith("\n")) lines.subList(0, lines.size - 1) else lines
}

private fun json(ids: IntArray): String = ids.joinToString(", ", "[", "]")

/** A "--chunks" line: L, the overlap (null: the default) and the text. */
private fun chunkCase(line: String, where: String): Triple<Int, Int?, String> {
    val space = line.indexOf(' ')
    if (space < 0) throw UsageError("$where: expected \"MAX OVERLAP HEX\"")
    val max = line.substring(0, space).toIntOrNull() ?: throw UsageError("$where: MAX must be a number")
    val (overlap, text) = units(line.substring(space + 1), where)
    return Triple(max, overlap, text)
}

private fun units(line: String, where: String): Pair<Int?, String> {
    val space = line.indexOf(' ')
    if (space < 0) throw UsageError("$where: expected \"MAX HEX\"")
    val max = line.substring(0, space)
    val hex = line.substring(space + 1)
    if (hex.length % 4 != 0) throw UsageError("$where: HEX must be 4 digits per UTF-16 unit")
    val chars = CharArray(hex.length / 4) { hex.substring(4 * it, 4 * it + 4).toInt(16).toChar() }
    return Pair(if (max == "-") null else max.toInt(), String(chars))
}

private fun bench(tok: EdgeM3Tokenizer, texts: List<String>, maxLength: Int?) {
    if (texts.isEmpty()) throw UsageError("no texts to time")
    var best = 0.0
    var tokens = 0L
    val rounds = 7
    for (round in 0 until rounds) {  // the first two rounds warm the JIT up and are not counted
        val t0 = System.nanoTime()
        var n = 0L
        for (t in texts) n += tok.encode(t, maxLength).size
        val rate = texts.size / ((System.nanoTime() - t0) / 1e9)
        if (round >= 2 && rate > best) {
            best = rate
            tokens = n
        }
    }
    println("texts: ${texts.size}, tokens per text: ${"%.1f".format(tokens.toDouble() / texts.size)}")
    println("best of ${rounds - 2} rounds after a warm-up: ${"%.0f".format(best)} texts/s " +
        "(${"%.0f".format(best * tokens / texts.size)} tokens/s), 1 thread")
}

fun main(args: Array<String>) {
    val usage = "usage: KitTokenize [--units|--chunks|--bench] BUNDLE FILE [--max-length N]"
    try {
        val rest = args.toMutableList()
        val mode = if (rest.isNotEmpty() && rest[0].startsWith("--")) rest.removeAt(0) else ""
        var maxLength: Int? = null
        val at = rest.indexOf("--max-length")
        if (at >= 0) {
            maxLength = rest.getOrNull(at + 1)?.toIntOrNull() ?: throw UsageError(usage)
            rest.subList(at, at + 2).clear()
        }
        if (rest.size != 2 || mode !in listOf("", "--units", "--chunks", "--bench")) throw UsageError(usage)
        val t0 = System.nanoTime()
        val tok = loadTokenizer(File(rest[0]))
        val loadMs = (System.nanoTime() - t0) / 1e6
        val lines = readLines(File(rest[1]))
        val out = StringBuilder()
        when (mode) {
            "--bench" -> {
                var again = 0.0
                for (i in 0 until 3) {
                    val t1 = System.nanoTime()
                    loadTokenizer(File(rest[0]))
                    again = (System.nanoTime() - t1) / 1e6
                }
                println("load: ${"%.0f".format(loadMs)} ms first, ${"%.0f".format(again)} ms on the third reload")
                bench(tok, lines, maxLength)
                return
            }
            "--units" -> for ((i, line) in lines.withIndex()) {
                val (max, text) = units(line, "${rest[1]}:${i + 1}")
                try {
                    out.append(json(tok.encode(text, max))).append('\n')
                } catch (exc: EdgeM3Exception) {
                    out.append("error: ").append(exc.message).append('\n')
                }
            }
            "--chunks" -> for ((i, line) in lines.withIndex()) {
                val (max, overlap, text) = chunkCase(line, "${rest[1]}:${i + 1}")
                try {
                    out.append(tok.encodeChunks(text, max, overlap).joinToString(", ", "[", "]") { json(it) }).append('\n')
                } catch (exc: EdgeM3Exception) {
                    out.append("error: ").append(exc.message).append('\n')
                }
            }
            else -> for (line in lines) {
                try {
                    out.append(json(tok.encode(line, maxLength))).append('\n')
                } catch (exc: EdgeM3Exception) {
                    throw UsageError("${exc.message}")
                }
            }
        }
        System.out.write(out.toString().toByteArray(Charsets.UTF_8))
        System.out.flush()
    } catch (exc: UsageError) {
        System.err.println("kit_tokenize: ${exc.message}")
        exitProcess(2)
    } catch (exc: EdgeM3Exception) {
        System.err.println("kit_tokenize: ${exc.message}")
        exitProcess(2)
    }
}
