package dev.edgem3

import kotlin.math.abs
import kotlin.math.floor
import kotlin.math.min
import kotlin.math.sqrt

// The device pipeline of docs/bundle-format.md in plain Kotlin (stdlib only): manifest model,
// token ids, signature choice, padding, post-processing and golden comparison. No Android or
// TFLite import, so CI compiles and runs it on the JVM against a real bundle's golden.json.
// Reference: edge_m3/tokenizer.py, edge_m3/pipeline.py, edge_m3/postprocess.py.
// ios_assets/Sources/EdgeM3/ (a Swift package) implements the same steps; CI replays golden.json with both.
// Written for Kotlin 1.3+ (what CI compiles with): no trailing commas, no newer stdlib calls.

/** A bundle or input that breaks the contract; the message names the file or field. */
class EdgeM3Exception(message: String) : RuntimeException(message)

/** Typed access to parsed JSON trees (MiniJson's, or org.json converted to maps and lists). */
object JsonTree {
    @Suppress("UNCHECKED_CAST")
    fun obj(x: Any?, where: String): Map<String, Any?> =
        x as? Map<String, Any?> ?: throw EdgeM3Exception("$where: expected a JSON object")

    fun list(x: Any?, where: String): List<Any?> =
        x as? List<Any?> ?: throw EdgeM3Exception("$where: expected a JSON array")

    fun field(tree: Map<String, Any?>, key: String, where: String): Any? {
        if (!tree.containsKey(key)) throw EdgeM3Exception("$where: missing \"$key\"")
        return tree[key]
    }

    fun str(x: Any?, where: String): String =
        x as? String ?: throw EdgeM3Exception("$where: expected a string")

    fun int(x: Any?, where: String): Int {
        val n = x as? Number ?: throw EdgeM3Exception("$where: expected an integer")
        val d = n.toDouble()
        if (d != floor(d) || d < Int.MIN_VALUE || d > Int.MAX_VALUE) {
            throw EdgeM3Exception("$where: expected an integer, got $x")
        }
        return n.toInt()
    }

    fun float(x: Any?, where: String): Float {
        val n = x as? Number ?: throw EdgeM3Exception("$where: expected a number")
        return n.toDouble().toFloat()  // the double nearest the text, then float32: bit exact
    }

    fun ints(x: Any?, where: String): IntArray {
        val l = list(x, where)
        return IntArray(l.size) { int(l[it], "$where[$it]") }
    }

    fun floats(x: Any?, where: String): FloatArray {
        val l = list(x, where)
        return FloatArray(l.size) { float(l[it], "$where[$it]") }
    }

    fun matrix(x: Any?, where: String): Array<FloatArray> {
        val l = list(x, where)
        return Array(l.size) { floats(l[it], "$where[$it]") }
    }
}

class SpecialIds(val bos: Int, val pad: Int, val eos: Int, val unk: Int, val mask: Int) {
    /** The id of a special token by its manifest key (EdgeM3Contract.SPECIAL_KEYS). */
    operator fun get(key: String): Int = when (key) {
        "bos" -> bos
        "pad" -> pad
        "eos" -> eos
        "unk" -> unk
        "mask" -> mask
        else -> throw EdgeM3Exception("manifest.json: unknown special token key $key")
    }

    /** Every special id: what a trimmed vocabulary must keep. */
    fun all(): List<Int> = EdgeM3Contract.SPECIAL_KEYS.map { get(it) }

    /** What lexical weights leave out: FlagEmbedding drops <s>, </s>, <pad>, <unk>, keeps <mask>. */
    fun skip(): Set<Int> = EdgeM3Contract.LEXICAL_SKIP_KEYS.map { get(it) }.toSet()
}

/** The manifest's `tokenizer` entry (edge_m3.tokenizer.TokenizerSpec). */
class TokenizerSpec(
    val file: String,
    val special: SpecialIds,
    val spUnkId: Int,
    val idOffset: Int,
    val vocabSize: Int,
    val vocabMapFile: String?,
    val specialTokens: SpecialTokens = SpecialTokens.XLMR
) {
    companion object {
        /** The `tokenizer` object of manifest.json; `special_tokens` absent or null: XLM-R's strings. */
        fun fromJson(tree: Any?): TokenizerSpec {
            val w = "manifest.json: tokenizer"
            val tok = JsonTree.obj(tree, w)
            val sp = JsonTree.obj(JsonTree.field(tok, "special_ids", w), "$w.special_ids")
            fun special(k: String): Int = JsonTree.int(JsonTree.field(sp, k, "$w.special_ids"), "$w.special_ids.$k")
            var vocabMapFile: String? = null
            val vocabMap = tok["vocab_map"]
            if (vocabMap != null) {
                vocabMapFile = JsonTree.str(
                    JsonTree.field(JsonTree.obj(vocabMap, "$w.vocab_map"), "file", "$w.vocab_map"),
                    "$w.vocab_map.file")
            }
            val tokens = tok["special_tokens"]
            return TokenizerSpec(
                JsonTree.str(JsonTree.field(tok, "file", w), "$w.file"),
                SpecialIds(special("bos"), special("pad"), special("eos"), special("unk"), special("mask")),
                JsonTree.int(JsonTree.field(tok, "sp_unk_id", w), "$w.sp_unk_id"),
                JsonTree.int(JsonTree.field(tok, "id_offset", w), "$w.id_offset"),
                JsonTree.int(JsonTree.field(tok, "vocab_size", w), "$w.vocab_size"),
                vocabMapFile,
                if (tokens == null) SpecialTokens.XLMR else
                    SpecialTokens.fromMap(JsonTree.obj(tokens, "$w.special_tokens"), "$w.special_tokens")
            )
        }
    }
}

class TensorSpec(val name: String, val shape: IntArray, val dtype: String)

class Signature(val name: String, val seqLen: Int, val inputs: List<TensorSpec>, val outputs: List<TensorSpec>) {
    fun output(name: String): TensorSpec? = outputs.firstOrNull { it.name == name }
}

class ModelEntry(val format: String, val file: String, val quant: String, val signatures: List<Signature>) {
    fun signature(name: String): Signature {
        for (s in signatures) if (s.name == name) return s
        throw EdgeM3Exception("manifest.json: $file has no signature $name")
    }
}

class FileEntry(val sha256: String, val size: Long)

class Manifest(
    val schemaVersion: Int,
    val quant: String,
    val hiddenSize: Int,
    val maxLength: Int,
    val heads: List<String>,
    val tokenizer: TokenizerSpec,
    val models: List<ModelEntry>,
    val files: Map<String, FileEntry>
) {
    /** The model entry of `format` ("tflite" for the Android and iOS kits). */
    fun model(format: String): ModelEntry {
        for (m in models) if (m.format == format) return m
        throw EdgeM3Exception("manifest.json: no $format model (has ${models.map { it.format }})")
    }

    companion object {
        fun fromJson(tree: Any?): Manifest {
            val w = EdgeM3Contract.MANIFEST
            val t = JsonTree.obj(tree, w)
            val version = JsonTree.int(JsonTree.field(t, "schema_version", w), "$w: schema_version")
            if (version != EdgeM3Contract.SCHEMA_VERSION) {
                throw EdgeM3Exception("$w: schema_version $version, this kit reads ${EdgeM3Contract.SCHEMA_VERSION}")
            }
            val tokenizer = TokenizerSpec.fromJson(JsonTree.field(t, "tokenizer", w))
            val models = JsonTree.list(JsonTree.field(t, "models", w), "$w: models").mapIndexed { i, m ->
                parseModel(JsonTree.obj(m, "$w: models[$i]"), "$w: models[$i]")
            }
            val files = LinkedHashMap<String, FileEntry>()
            val fileTree = t["files"]
            if (fileTree != null) {
                for ((name, e) in JsonTree.obj(fileTree, "$w: files")) {
                    val f = JsonTree.obj(e, "$w: files.$name")
                    files[name] = FileEntry(JsonTree.str(f["sha256"], "$w: files.$name.sha256"),
                        JsonTree.int(f["size"], "$w: files.$name.size").toLong())
                }
            }
            return Manifest(
                version,
                JsonTree.str(JsonTree.field(t, "quant", w), "$w: quant"),
                JsonTree.int(JsonTree.field(t, "hidden_size", w), "$w: hidden_size"),
                JsonTree.int(JsonTree.field(t, "max_length", w), "$w: max_length"),
                JsonTree.list(JsonTree.field(t, "heads", w), "$w: heads").map { JsonTree.str(it, "$w: heads") },
                tokenizer, models, files
            )
        }

        private fun parseModel(m: Map<String, Any?>, w: String): ModelEntry {
            val sigs = JsonTree.list(JsonTree.field(m, "signatures", w), "$w: signatures").mapIndexed { i, s ->
                val st = JsonTree.obj(s, "$w: signatures[$i]")
                val sw = "$w: signatures[$i]"
                Signature(
                    JsonTree.str(JsonTree.field(st, "name", sw), "$sw.name"),
                    JsonTree.int(JsonTree.field(st, "seq_len", sw), "$sw.seq_len"),
                    parseTensors(st["inputs"], "$sw.inputs"),
                    parseTensors(st["outputs"], "$sw.outputs")
                )
            }
            if (sigs.isEmpty()) throw EdgeM3Exception("$w: no signatures")
            return ModelEntry(
                JsonTree.str(JsonTree.field(m, "format", w), "$w.format"),
                JsonTree.str(JsonTree.field(m, "file", w), "$w.file"),
                JsonTree.str(m["quant"] ?: "", "$w.quant"),
                sigs.sortedBy { it.seqLen }
            )
        }

        private fun parseTensors(x: Any?, w: String): List<TensorSpec> {
            if (x == null) return emptyList()
            return JsonTree.list(x, w).mapIndexed { i, e ->
                val t = JsonTree.obj(e, "$w[$i]")
                TensorSpec(JsonTree.str(t["name"], "$w[$i].name"), JsonTree.ints(t["shape"], "$w[$i].shape"),
                    JsonTree.str(t["dtype"], "$w[$i].dtype"))
            }
        }
    }
}

/** Original id -> row of a trimmed embedding table (vocab_map.json); ids not kept -> the <unk> row. */
class VocabMap(val keptIds: IntArray, special: SpecialIds) {
    val unkRow: Int = row(special.unk)

    /** Binary search in the sorted kept ids; the <unk> row when absent (edge_m3.vocab.row_map). */
    fun row(id: Int): Int {
        var lo = 0
        var hi = keptIds.size - 1
        while (lo <= hi) {
            val mid = (lo + hi) ushr 1
            val v = keptIds[mid]
            if (v < id) lo = mid + 1 else if (v > id) hi = mid - 1 else return mid
        }
        return unkRow
    }

    fun rows(ids: IntArray): IntArray = IntArray(ids.size) { row(ids[it]) }

    companion object {
        fun fromJson(tree: Any?, tokenizer: TokenizerSpec): VocabMap {
            val w = tokenizer.vocabMapFile ?: EdgeM3Contract.VOCAB_MAP
            val kept = JsonTree.ints(JsonTree.field(JsonTree.obj(tree, w), "kept_ids", w), "$w: kept_ids")
            for (i in kept.indices) {
                if (kept[i] < 0 || kept[i] >= tokenizer.vocabSize || (i > 0 && kept[i] <= kept[i - 1])) {
                    throw EdgeM3Exception("$w: kept ids must be sorted, unique and < ${tokenizer.vocabSize}")
                }
            }
            // Every special token, as edge_m3/vocab.py's REQUIRED_SPECIALS.
            val missing = tokenizer.special.all().filter { kept.indexOf(it) < 0 }
            if (missing.isNotEmpty()) throw EdgeM3Exception("$w: kept ids lack the special ids $missing")
            return VocabMap(kept, tokenizer.special)
        }
    }
}

/** One text's ids (original vocabulary, truncated, unpadded) and the signature that runs them. */
class Encoded(val inputIds: IntArray, val signature: Signature)

/** A signature's outputs as the runtime fills them: batch of one, `null` for a head not exported. */
class RawOutputs(
    val denseVecs: Array<FloatArray>?,
    val sparseWeights: Array<FloatArray>?,
    val colbertVecs: Array<Array<FloatArray>>?
)

/** FlagEmbedding's outputs for one text, plus the ids and the signature used. */
class Embedding(
    val inputIds: IntArray,
    val signature: String,
    val seqLen: Int,
    val denseVecs: FloatArray?,
    val lexicalWeights: Map<String, Float>?,
    val colbertVecs: Array<FloatArray>?
)

/** Runs one signature on `[1, L]` int32 ids and mask (a TFLite interpreter, or a replay in tests). */
interface ModelRunner {
    fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs
}

object EdgeM3Core {
    /** Step 2, too long: keep the first `maxLen - 1` ids and end with `</s>`. */
    fun truncate(ids: IntArray, maxLen: Int, eos: Int): IntArray {
        if (maxLen < 2) throw EdgeM3Exception("max length $maxLen: must be at least 2")
        if (ids.size <= maxLen) return ids
        val out = ids.copyOf(maxLen)
        out[maxLen - 1] = eos
        return out
    }

    /** Step 2: the smallest signature that holds `nTokens`, else the largest. */
    fun chooseSignature(nTokens: Int, signatures: List<Signature>): Signature {
        if (signatures.isEmpty()) throw EdgeM3Exception("manifest.json: the model has no signatures")
        var best: Signature? = null
        var largest = signatures[0]
        for (s in signatures) {
            if (s.seqLen > largest.seqLen) largest = s
            if (s.seqLen >= nTokens && (best == null || s.seqLen < best.seqLen)) best = s
        }
        return best ?: largest
    }

    /** Steps 1-2: the text's ids truncated to the largest signature (as edge_m3.pipeline does), and
     *  the signature to run. */
    fun encode(text: String, tokenizer: XlmrTokenizer, signatures: List<Signature>): Encoded {
        val ids = tokenizer.encode(text, chooseSignature(Int.MAX_VALUE, signatures).seqLen)
        return Encoded(ids, chooseSignature(ids.size, signatures))
    }

    /** Step 3: ids padded with `pad` to `seqLen`. */
    fun padIds(ids: IntArray, seqLen: Int, pad: Int): IntArray {
        if (ids.size > seqLen) throw EdgeM3Exception("${ids.size} tokens do not fit length $seqLen")
        val out = IntArray(seqLen) { pad }
        for (i in ids.indices) out[i] = ids[i]
        return out
    }

    /** Step 3: 1 for the `n` real tokens, 0 for pads. */
    fun attentionMask(n: Int, seqLen: Int): IntArray = IntArray(seqLen) { if (it < n) 1 else 0 }

    /** Step 5: max weight per id over the real tokens; skipped ids and weights <= 0 left out. */
    fun lexicalWeights(ids: IntArray, sparse: FloatArray, skip: Set<Int>, keys: IntArray): Map<String, Float> {
        val out = LinkedHashMap<String, Float>()
        for (i in ids.indices) {
            if (skip.contains(ids[i])) continue
            val w = sparse[i]
            if (w <= 0f) continue
            val key = keys[i].toString()
            val prev = out[key]
            if (w > (prev ?: 0f)) out[key] = w  // as Python's `w > out.get(key, 0.0)`: NaN never kept
        }
        return out
    }

    /** Step 5: one vector per real token after `<s>` (`</s>` included). */
    fun colbertVectors(colbert: Array<FloatArray>, n: Int): Array<FloatArray> {
        val keep = if (n - 1 < 0) 0 else min(n - 1, colbert.size)
        return Array(keep) { colbert[it].copyOf() }
    }

    /**
     * Raw outputs from flat float32 tensors (what LiteRT's `TensorBuffer.readFloat` gives), shaped
     * as the manifest says: [1, H], [1, L], [1, L-1, H]; heads the signature lacks stay null.
     */
    fun rawFromFlat(signature: Signature, flat: (String) -> FloatArray): RawOutputs {
        fun rows(name: String): Array<FloatArray>? {
            val t = signature.output(name) ?: return null
            val values = flat(name)
            val width = t.shape[t.shape.size - 1]
            val n = t.shape.fold(1) { a, b -> a * b }
            if (values.size != n) throw EdgeM3Exception("$name: ${values.size} values, manifest shape ${t.shape.toList()}")
            return Array(n / width) { r -> values.copyOfRange(r * width, (r + 1) * width) }
        }
        return RawOutputs(rows(EdgeM3Contract.DENSE_VECS), rows(EdgeM3Contract.SPARSE_WEIGHTS),
            rows(EdgeM3Contract.COLBERT_VECS)?.let { arrayOf(it) })
    }

    /** Step 5 over a signature's raw outputs; `vocab` maps a trimmed table's rows (keys stay original). */
    fun postprocess(raw: RawOutputs, enc: Encoded, special: SpecialIds, vocab: VocabMap?): Embedding {
        val ids = enc.inputIds
        val rows = if (vocab == null) ids else vocab.rows(ids)
        val skip = if (vocab == null) special.skip() else special.skip().map { vocab.row(it) }.toSet()
        val dense = raw.denseVecs?.get(0)?.copyOf()
        val lexical = raw.sparseWeights?.let { lexicalWeights(rows, it[0], skip, ids) }
        val colbert = raw.colbertVecs?.let { colbertVectors(it[0], ids.size) }
        return Embedding(ids, enc.signature.name, enc.signature.seqLen, dense, lexical, colbert)
    }

    /** Steps 3-5: pad (table rows for a trimmed vocabulary), run the chosen signature, post-process. */
    fun run(enc: Encoded, manifest: Manifest, runner: ModelRunner, vocab: VocabMap?): Embedding {
        val special = manifest.tokenizer.special
        val rows = if (vocab == null) enc.inputIds else vocab.rows(enc.inputIds)
        val pad = if (vocab == null) special.pad else vocab.row(special.pad)
        val seqLen = enc.signature.seqLen
        val raw = runner.run(enc.signature, padIds(rows, seqLen, pad), attentionMask(rows.size, seqLen))
        return postprocess(raw, enc, special, vocab)
    }

    /** Steps 1-5 for one text: what an app calls (not thread-safe when `runner` is not); a trimmed
     *  bundle's rows come from `tokenizer.vocab`. */
    fun embed(text: String, manifest: Manifest, model: ModelEntry, tokenizer: XlmrTokenizer,
              runner: ModelRunner): Embedding =
        run(encode(text, tokenizer, model.signatures), manifest, runner, tokenizer.vocab)

    // ---- golden.json: exact checks of ids / signature / post-processing, tolerant ones of live outputs

    class GoldenCase(val text: String, val expected: Embedding, val raw: RawOutputs)

    class Golden(val quant: String, val modelFile: String, val cases: List<GoldenCase>)

    /** Live-output tolerance of a variant (EdgeM3Contract, generated from edge_m3/contract.py):
     *  the same model file on another CPU differs by kernel rounding only. */
    fun toleranceFor(quant: String): EdgeM3Contract.Tolerance = EdgeM3Contract.TOLERANCES[quant]
        ?: throw EdgeM3Exception("manifest.json: quant $quant is not one of ${EdgeM3Contract.QUANTS}")

    fun parseGolden(tree: Any?): Golden {
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
        return Golden(JsonTree.str(t["quant"] ?: "", "$w: quant"), JsonTree.str(t["model_file"] ?: "", "$w: model_file"),
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
