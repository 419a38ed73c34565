// JVM-only CI tool (not part of the app): the kit's Retrieval scores and EdgeM3Index search, driven
// by tests/test_kit_retrieval.py (the Swift twin: ios_assets/Sources/EdgeM3Retrieval/main.swift).
//
//   java -cp edge_m3_kit.jar dev.edgem3.RetrievalCheckKt score CASES
//       per pair, weights set and mode: "PAIR SET MODE HEX" (HEX: the float64 score's bits, or "error")
//   java -cp ... dev.edgem3.RetrievalCheckKt search INDEX QUERIES PLAN [--bundle DIR] [--scope passages|chunks]
//       per plan line and query: "LINE QUERY ROW:HEX ROW:HEX ..." (best first; passages), or "LINE
//       QUERY error"; with --scope, that search ("Passages and chunks") and "ROW:CHUNK:HEX" per hit
//   java -cp edge_m3_kit.jar:sqlite-jdbc.jar dev.edgem3.RetrievalCheckKt ops DIR OPS
//       EdgeM3WritableIndex (SQLite through jvm/JdbcIndexDb.kt) runs the op log OPS on the index in
//       folder DIR: one answer line per operation (tools/kit/retrieval_wire.py, "op log")
//   java -cp ... dev.edgem3.RetrievalCheckKt bench INDEX QUERIES K MODE[,MODE...] REPEATS
//       per mode: "MODE WALL:CPU WALL:CPU ..." seconds of one search each, wall clock and the
//       thread's CPU time (one thread; every query REPEATS times after one warm-up pass)
//
// CASES and QUERIES are whitespace-separated tokens, every float as the hex of its bits (float32:
// 8 digits, float64: 16), so nothing is lost on the way:
//   CASES   = "weights" K (HEX64 HEX64 HEX64)*K "pairs" N (VECTORS VECTORS)*N
//   QUERIES = "queries" N VECTORS*N
//   PLAN    = "plan" N (K MODE HEX64 HEX64 HEX64)*N    (K, mode, weights dense sparse colbert)
//   VECTORS = ("D" LEN HEX32*LEN | "D" "-") ("L" N (ID HEX32)*N | "L" "-") ("C" ROWS DIM HEX32*(ROWS*DIM) | "C" "-")
// Bad input: one line on stderr, exit 2.
package dev.edgem3

import java.io.File
import kotlin.system.exitProcess

private class Tokens(text: String) {
    private val t = text.split(Regex("\\s+")).filter { it.isNotEmpty() }
    private var i = 0

    fun next(): String = if (i < t.size) t[i++] else throw EdgeM3Exception("input ends early")
    fun expect(word: String) {
        val got = next()
        if (got != word) throw EdgeM3Exception("expected \"$word\", got \"$got\"")
    }
    fun int(): Int = next().toIntOrNull() ?: throw EdgeM3Exception("expected a number")
    fun f32(): Float = java.lang.Float.intBitsToFloat(java.lang.Integer.parseUnsignedInt(next(), 16))
    fun f64(): Double = java.lang.Double.longBitsToDouble(java.lang.Long.parseUnsignedLong(next(), 16))
    fun absent(): Boolean = if (i < t.size && t[i] == "-") { i++; true } else false

    fun vectors(): Retrieval.Vectors {
        expect("D")
        val dense = if (absent()) null else FloatArray(int()).also { for (k in it.indices) it[k] = f32() }
        expect("L")
        val lexical = if (absent()) null else {
            val n = int()
            val ids = IntArray(n)
            val ws = FloatArray(n)
            for (k in 0 until n) { ids[k] = int(); ws[k] = f32() }
            Retrieval.Lexical.of(ids.indices.associate { ids[it].toString() to ws[it] })
        }
        expect("C")
        val colbert = if (absent()) null else {
            val rows = int()
            val dim = int()
            Array(rows) { FloatArray(dim) { f32() } }
        }
        return Retrieval.Vectors(dense, lexical, colbert)
    }
}

private fun hex(x: Double): String = String.format("%016x", java.lang.Double.doubleToRawLongBits(x))

private fun score(cases: File) {
    val t = Tokens(cases.readText())
    t.expect("weights")
    val sets = List(t.int()) { DoubleArray(3) { t.f64() } }
    t.expect("pairs")
    val n = t.int()
    val out = StringBuilder()
    for (i in 0 until n) {
        val q = t.vectors()
        val p = t.vectors()
        for ((k, w) in sets.withIndex()) {
            for (mode in Retrieval.MODES) {
                val s = try { hex(Retrieval.score(q, p, mode, w)) } catch (e: EdgeM3Exception) { "error" }
                out.append("$i $k $mode $s\n")
            }
        }
    }
    print(out)
}

private fun queries(file: File): List<Retrieval.Vectors> {
    val t = Tokens(file.readText())
    t.expect("queries")
    return List(t.int()) { t.vectors() }
}

/**
 * The ScoreMode overloads of search (EdgeM3Options.kt) give `hits`, the string mode's answer, hit
 * for hit (`key`: row, chunk, score bits; the writable index's hits add the id): with these
 * weights, and, when the weights are the defaults and the scope passages, with both left out
 * (`weights` null to `run`). An unknown mode string has no enum.
 */
private fun <H> sameByEnum(hits: List<H>, mode: String, weights: DoubleArray, chunks: Boolean, key: (H) -> String,
                           run: (ScoreMode, DoubleArray?) -> List<H>) {
    val m = ScoreMode.values().firstOrNull { it.wire == mode } ?: return
    val defaults = !chunks && weights.contentEquals(Retrieval.DEFAULT_WEIGHTS)
    for (w in if (defaults) listOf(weights, null) else listOf(weights)) {
        val other = run(m, w)
        if (other.map(key) != hits.map(key)) throw IllegalStateException("ScoreMode.$m (weights ${w?.toList()}) gave $other, the string \"$mode\" $hits")
    }
}

private fun search(given: List<String>) {
    val all = given.toMutableList()
    val scopeAt = all.indexOf("--scope")
    val scope = if (scopeAt < 0) null else all.getOrNull(scopeAt + 1) ?: usage()
    if (scope != null && scope != "passages" && scope != "chunks") usage()
    if (scopeAt >= 0) all.subList(scopeAt, scopeAt + 2).clear()
    val at = all.indexOf("--bundle")
    val args = if (at >= 0) all.subList(0, at) else all
    if (args.size != 3 || (at >= 0 && at != all.size - 2)) usage()
    // The bundle's manifest.json files: name -> sha256, what an app holding the bundle passes.
    val bundleFiles = if (at < 0) null else {
        val m = JsonTree.obj(MiniJson.parse(File(all[at + 1], EdgeM3Contract.MANIFEST).readText()), EdgeM3Contract.MANIFEST)
        JsonTree.obj(m["files"], "manifest.json: files").mapValues { (_, v) -> JsonTree.obj(v, "files")["sha256"] as String }
    }
    val index = EdgeM3Index.open(File(args[0]), bundleFiles)
    val qs = queries(File(args[1]))
    val plan = Tokens(File(args[2]).readText())
    plan.expect("plan")
    val out = StringBuilder()
    for (j in 0 until plan.int()) {
        val k = plan.int()
        val mode = plan.next()
        val weights = DoubleArray(3) { plan.f64() }
        for ((i, q) in qs.withIndex()) {
            out.append("$j $i")
            try {
                val hits = index.search(q, k, mode, weights, scope == "chunks")
                sameByEnum(hits, mode, weights, scope == "chunks", { "${it.row}/${it.chunk}/${it.score.toRawBits()}" }) { m, w ->
                    if (w == null) index.search(q, k, m) else index.search(q, k, m, w, scope == "chunks")
                }
                for (h in hits) {
                    out.append(if (scope == null) " ${h.row}:${hex(h.score)}" else " ${h.row}:${h.chunk}:${hex(h.score)}")
                }
            } catch (e: EdgeM3Exception) {
                out.append(" error")
            }
            out.append("\n")
        }
    }
    print(out)
}

/** The op log's id token: "i" DECIMAL (an integer id) or "s" HEX (a string id's UTF-8 bytes). */
private fun parseId(token: String): PassageId = when {
    token.startsWith("i") -> PassageId.of(token.substring(1).toLongOrNull() ?: throw EdgeM3Exception("bad id token $token"))
    token.startsWith("s") && token.length % 2 == 1 -> {
        val hex = token.substring(1)
        PassageId.of(String(ByteArray(hex.length / 2) { hex.substring(2 * it, 2 * it + 2).toInt(16).toByte() }, Charsets.UTF_8))
    }
    else -> throw EdgeM3Exception("bad id token $token")
}

private fun idToken(id: PassageId): String = when (id) {
    is PassageId.Str -> "s" + id.value.toByteArray(Charsets.UTF_8).joinToString("") { String.format("%02x", it.toInt() and 0xff) }
    is PassageId.Num -> "i${id.value}"
}


private fun ops(dir: File, file: File) {
    val t = Tokens(file.readText())
    t.expect("ops")
    val n = t.int()
    var index: EdgeM3WritableIndex? = null
    val out = StringBuilder()
    fun open(): EdgeM3WritableIndex {
        index?.close()
        index = null
        return EdgeM3WritableIndex.open(dir, JdbcIndexDbDriver).also { index = it }
    }
    fun need(): EdgeM3WritableIndex = index ?: throw EdgeM3Exception("no index open")
    // Other processes write the folder at once (retrieval_wire.CONCURRENT_ENV): a second search may
    // see their commits, so the ScoreMode overloads are not searched again.
    val concurrent = System.getenv("EDGE_M3_OPS_CONCURRENT") != null
    for (i in 0 until n) {
        // Every operation's tokens are read before it runs, so a refused one leaves the log in step.
        val answer: () -> String = when (val op = t.next()) {
            "create" -> {
                val dim = t.int()
                val dense = t.next()
                val colbert = t.next()
                val f = {
                    index?.close()
                    index = null
                    index = EdgeM3WritableIndex.create(dir, dim, dense, colbert, null, JdbcIndexDbDriver)
                    "ok"
                }
                f
            }
            "open", "reopen" -> { { open(); "ok" } }
            "add", "update" -> {
                val id = parseId(t.next())
                val size = t.int()
                if (size < 0) throw EdgeM3Exception("$op: $size chunks")  // bad input (exit 2), as a bad token
                val chunks = List(size) { t.vectors() }  // N = 0: refused by the index
                val f = { if (op == "add") need().add(id, chunks) else need().update(id, chunks); "ok" }
                f
            }
            "remove" -> {
                val id = parseId(t.next())
                val f = { need().remove(id); "ok" }
                f
            }
            "contains" -> {
                val id = parseId(t.next())
                val f = { "contains ${need().contains(id)}" }
                f
            }
            "compact" -> { { need().compact(); "ok" } }
            "count" -> { { "count ${need().count}" } }
            "search" -> {
                val k = t.int()
                val mode = t.next()
                val weights = DoubleArray(3) { t.f64() }
                val chunks = when (val scope = t.next()) {
                    "passages" -> false
                    "chunks" -> true
                    else -> throw EdgeM3Exception("bad search scope \"$scope\"")
                }
                val q = t.vectors()
                val f = {
                    val x = need()
                    val hits = x.search(q, k, mode, weights, chunks)
                    if (!concurrent) {
                        sameByEnum(hits, mode, weights, chunks, { "${it.row}/${idToken(it.id)}/${it.chunk}/${it.score.toRawBits()}" }) { m, w ->
                            if (w == null) x.search(q, k, m) else x.search(q, k, m, w, chunks)
                        }
                    }
                    "hits ${hits.size}" + hits.joinToString("") { " ${it.row} ${idToken(it.id)} ${it.chunk} ${hex(it.score)}" }
                }
                f
            }
            else -> throw EdgeM3Exception("unknown operation \"$op\"")
        }
        val line = try { answer() } catch (e: EdgeM3Exception) { "error ${e.kind.wire}" }  // spec.KIT_ERROR_KINDS
        out.append(line).append('\n')
    }
    index?.close()
    print(out)
}

private fun bench(args: List<String>) {
    val t0 = System.nanoTime()
    val index = EdgeM3Index.open(File(args[0]), verifySha256 = false)
    println("open ${(System.nanoTime() - t0) / 1e9} s, ${index.count} passages")
    val qs = queries(File(args[1]))
    val k = args[2].toIntOrNull() ?: throw EdgeM3Exception("K: not a number")
    val repeats = args[4].toIntOrNull() ?: throw EdgeM3Exception("REPEATS: not a number")
    val threads = java.lang.management.ManagementFactory.getThreadMXBean()
    for (mode in args[3].split(",")) {
        for (q in qs) index.search(q, k, mode)  // warm-up: JIT and page cache
        val times = StringBuilder(mode)
        for (r in 0 until repeats) {
            for (q in qs) {
                val c = threads.currentThreadCpuTime
                val s = System.nanoTime()
                index.search(q, k, mode)
                times.append(" ${(System.nanoTime() - s) / 1e9}:${(threads.currentThreadCpuTime - c) / 1e9}")
            }
        }
        println(times)
    }
}

fun main(args: Array<String>) {
    try {
        when (args.firstOrNull()) {
            "score" -> if (args.size == 2) score(File(args[1])) else usage()
            "search" -> search(args.drop(1))
            "ops" -> if (args.size == 3) ops(File(args[1]), File(args[2])) else usage()
            "bench" -> if (args.size == 6) bench(args.drop(1)) else usage()
            else -> usage()
        }
    } catch (e: EdgeM3Exception) {
        System.err.println(e.message)
        exitProcess(2)
    }
}

private fun usage(): Nothing {
    System.err.println("usage: RetrievalCheckKt score CASES | search INDEX QUERIES PLAN [--bundle DIR] [--scope passages|chunks] | ops DIR OPS | bench INDEX QUERIES K MODE[,MODE...] REPEATS")
    exitProcess(2)
}
