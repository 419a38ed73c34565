package dev.edgem3

import kotlin.math.abs
import kotlin.math.sqrt

// Test support, not the library: golden.json (docs/bundle-format.md) and how a kit's result is held
// against it; exact checks of ids / signature / post-processing, tolerant ones of live outputs.
// Used by the instrumented EdgeM3GoldenTest (a phone) and by jvm/GoldenCheck.kt (CI, live through
// LiteRtCRunner). The Swift kit keeps the same in Tests/EdgeM3Tests/GoldenFile.swift.

object Golden {
    class GoldenCase(val text: String, val expected: Embedding, val raw: RawOutputs)

    class GoldenFile(val quant: String, val modelFile: String, val cases: List<GoldenCase>)

    /** Live-output tolerance of a variant (EdgeM3Contract, generated from edge_m3/spec/recipes.py):
     *  the same model file on another CPU differs by kernel rounding only. */
    fun toleranceFor(quant: String): EdgeM3Contract.Tolerance = EdgeM3Contract.TOLERANCES[quant]
        ?: throw EdgeM3Exception("manifest.json: quant $quant is not one of ${EdgeM3Contract.QUANTS}")

    fun parse(tree: Any?): GoldenFile {
        val w = EdgeM3Contract.GOLDEN
        val t = JsonTree.obj(tree, w)
        val cases = JsonTree.list(JsonTree.field(t, "cases", w), "$w: cases").mapIndexed { i, c ->
            val cw = "$w: cases[$i]"
            val ct = JsonTree.obj(c, cw)
            val rt = JsonTree.obj(JsonTree.field(ct, "raw", cw), "$cw.raw")
            val raw = RawOutputs(
                rt[EdgeM3Contract.DENSE_VECS]?.let { JsonTree.matrix(it, "$cw.raw.dense_vecs") },
                rt[EdgeM3Contract.SPARSE_WEIGHTS]?.let { JsonTree.matrix(it, "$cw.raw.sparse_weights") },
                rt[EdgeM3Contract.COLBERT_VECS]?.let { x ->
                    val l = JsonTree.list(x, "$cw.raw.colbert_vecs")
                    Array(l.size) { JsonTree.matrix(l[it], "$cw.raw.colbert_vecs[$it]") }
                }
            )
            val lex = ct[EdgeM3Contract.LEXICAL_WEIGHTS]?.let { x ->
                val m = LinkedHashMap<String, Float>()
                for ((k, v) in JsonTree.obj(x, "$cw.lexical_weights")) m[k] = JsonTree.float(v, "$cw.lexical_weights.$k")
                m
            }
            val expected = Embedding(
                JsonTree.ints(JsonTree.field(ct, EdgeM3Contract.INPUT_IDS, cw), "$cw.${EdgeM3Contract.INPUT_IDS}"),
                JsonTree.str(JsonTree.field(ct, "signature", cw), "$cw.signature"),
                JsonTree.int(JsonTree.field(ct, "seq_len", cw), "$cw.seq_len"),
                ct[EdgeM3Contract.DENSE_VECS]?.let { JsonTree.floats(it, "$cw.dense_vecs") },
                lex,
                ct[EdgeM3Contract.COLBERT_VECS]?.let { JsonTree.matrix(it, "$cw.colbert_vecs") }
            )
            GoldenCase(JsonTree.str(JsonTree.field(ct, "text", cw), "$cw.text"), expected, raw)
        }
        return GoldenFile(JsonTree.str(t["quant"] ?: "", "$w: quant"), JsonTree.str(t["model_file"] ?: "", "$w: model_file"),
            cases)
    }

    /** Problems between two embeddings that must agree bit for bit (empty list: identical). */
    fun compareExact(actual: Embedding, expected: Embedding): List<String> {
        val out = ArrayList<String>()
        if (!actual.inputIds.contentEquals(expected.inputIds)) {
            out.add("input_ids ${actual.inputIds.toList()} != ${expected.inputIds.toList()}")
        }
        if (actual.signature != expected.signature || actual.seqLen != expected.seqLen) {
            out.add("signature ${actual.signature}/${actual.seqLen} != ${expected.signature}/${expected.seqLen}")
        }
        compareVectors(EdgeM3Contract.DENSE_VECS, actual.denseVecs, expected.denseVecs, 0f, out)
        val a = actual.lexicalWeights
        val e = expected.lexicalWeights
        if ((a == null) != (e == null)) {
            out.add("lexical_weights present ${a != null} != ${e != null}")
        } else if (a != null && e != null) {
            if (a.keys != e.keys) out.add("lexical_weights keys ${a.keys.sorted()} != ${e.keys.sorted()}")
            for ((k, v) in e) {
                val got = a[k]
                if (got != null && got != v) out.add("lexical_weights[$k] $got != $v")
            }
        }
        compareMatrices(actual.colbertVecs, expected.colbertVecs, 0f, out)
        return out
    }

    /** Problems beyond `tol` between live outputs and the golden ones (ids and signature still exact). */
    fun compareWithin(actual: Embedding, expected: Embedding, tol: EdgeM3Contract.Tolerance): List<String> {
        val out = ArrayList<String>()
        if (!actual.inputIds.contentEquals(expected.inputIds)) out.add("input_ids differ")
        if (actual.signature != expected.signature) out.add("signature ${actual.signature} != ${expected.signature}")
        val ad = actual.denseVecs
        val ed = expected.denseVecs
        if (ad != null && ed != null && ad.size == ed.size) {
            val cos = cosine(ad, ed)
            if (cos < tol.denseCosineMin) out.add("dense_vecs cosine $cos < ${tol.denseCosineMin}")
        }
        compareVectors(EdgeM3Contract.DENSE_VECS, ad, ed, tol.maxAbs, out)
        val a = actual.lexicalWeights
        val e = expected.lexicalWeights
        if (a != null && e != null) {
            // A weight near 0 may fall on either side of relu: compare over both key sets, missing = 0.
            for (k in a.keys.union(e.keys)) {
                val d = abs((a[k] ?: 0f) - (e[k] ?: 0f))
                if (d > tol.maxAbs) out.add("lexical_weights[$k] differs by $d > ${tol.maxAbs}")
            }
        } else if ((a == null) != (e == null)) {
            out.add("lexical_weights present ${a != null} != ${e != null}")
        }
        compareMatrices(actual.colbertVecs, expected.colbertVecs, tol.maxAbs, out)
        return out
    }

    fun cosine(a: FloatArray, b: FloatArray): Double {
        var ab = 0.0
        var aa = 0.0
        var bb = 0.0
        for (i in a.indices) {
            ab += a[i].toDouble() * b[i]
            aa += a[i].toDouble() * a[i]
            bb += b[i].toDouble() * b[i]
        }
        return if (aa == 0.0 || bb == 0.0) 0.0 else ab / sqrt(aa * bb)
    }

    private fun compareVectors(name: String, a: FloatArray?, e: FloatArray?, atol: Float, out: MutableList<String>) {
        if (a == null && e == null) return
        if (a == null || e == null || a.size != e.size) {
            out.add("$name shape ${a?.size} != ${e?.size}")
            return
        }
        for (i in a.indices) {
            val bad = if (atol == 0f) a[i] != e[i] else !(abs(a[i] - e[i]) <= atol)
            if (bad) {
                out.add("$name[$i] ${a[i]} != ${e[i]}")
                return
            }
        }
    }

    private fun compareMatrices(a: Array<FloatArray>?, e: Array<FloatArray>?, atol: Float, out: MutableList<String>) {
        if (a == null && e == null) return
        if (a == null || e == null || a.size != e.size) {
            out.add("colbert_vecs rows ${a?.size} != ${e?.size}")
            return
        }
        for (r in a.indices) compareVectors("colbert_vecs[$r]", a[r], e[r], atol, out)
    }
}
