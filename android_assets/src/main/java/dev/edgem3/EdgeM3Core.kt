package dev.edgem3

import kotlin.math.min

// The device pipeline of docs/bundle-format.md in plain Kotlin (stdlib only): token ids, signature
// choice, padding, running a ModelRunner, post-processing. The manifest types are Manifest.kt
// (generated from edge_m3/spec/), the runner IO ModelRunner.kt; golden comparison is test
// support (src/androidTest/.../Golden.kt). No Android or TFLite import, so CI runs it on the JVM
// against a real bundle's golden.json, live through jvm/LiteRtCRunner.kt.
// Reference: edge_m3/tokenizer/ (the tokenizer of the manifest's kind: EdgeM3Tokenizer.kt),
// edge_m3/pipeline.py, edge_m3/postprocess.py. The heads are whichever the signature exports
// (a BERT bundle has dense_vecs alone): a missing one stays null.
// ios_assets/Sources/EdgeM3/ (a Swift package) implements the same steps; CI replays golden.json with both.
// Written for Kotlin 1.3+ (what CI compiles with): no trailing commas, no newer stdlib calls.

/** One text's ids (original vocabulary, truncated, unpadded) and the signature that runs them. */
class Encoded(val inputIds: IntArray, val signature: Signature)

/** FlagEmbedding's outputs for one text, plus the ids and the signature used. */
class Embedding(
    val inputIds: IntArray,
    val signature: String,
    val seqLen: Int,
    val denseVecs: FloatArray?,
    val lexicalWeights: Map<String, Float>?,
    val colbertVecs: Array<FloatArray>?
)

object EdgeM3Core {
    /** Step 2, too long: keep the first `maxLen - 1` ids and end with `eos` (`</s>`, `[SEP]`). */
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
    fun encode(text: String, tokenizer: EdgeM3Tokenizer, signatures: List<Signature>): Encoded {
        val ids = tokenizer.encode(text, chooseSignature(Int.MAX_VALUE, signatures).seqLen)
        return Encoded(ids, chooseSignature(ids.size, signatures))
    }

    /**
     * A long text's chunks (docs/index-format.md, "Passages and chunks"): the tokenizer's
     * `encodeChunks` for the largest signature, each chunk with the smallest signature that holds it.
     */
    fun encodeChunks(text: String, tokenizer: EdgeM3Tokenizer, signatures: List<Signature>, overlap: Int? = null): List<Encoded> =
        tokenizer.encodeChunks(text, chooseSignature(Int.MAX_VALUE, signatures).seqLen, overlap)
            .map { Encoded(it, chooseSignature(it.size, signatures)) }

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
    fun embed(text: String, manifest: Manifest, model: ModelEntry, tokenizer: EdgeM3Tokenizer,
              runner: ModelRunner): Embedding =
        run(encode(text, tokenizer, model.signatures), manifest, runner, tokenizer.vocab)
}
