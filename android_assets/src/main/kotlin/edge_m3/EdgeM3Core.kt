// Platform-independent half of the edge-m3 device pipeline (docs/bundle-format.md, steps 1-5).
// No Android or TFLite imports: CI compiles and runs it on the JVM against a built golden.json.
// ios_assets/EdgeM3Core.swift mirrors this file line for line.
package edge_m3

class TokenizerSpec(
    val bos: Int, val pad: Int, val eos: Int, val unk: Int, val mask: Int,
    val spUnkId: Int, val idOffset: Int, val keptIds: IntArray?
)

class Signature(val name: String, val seqLen: Int)

class Manifest(val tokenizer: TokenizerSpec, val signatures: List<Signature>, val hiddenSize: Int) {
    companion object {
        /** Parse manifest.json (already decoded by MiniJson or org.json into maps and lists). */
        @Suppress("UNCHECKED_CAST")
        fun fromJson(root: Map<String, Any?>, format: String = "tflite", keptIds: IntArray? = null): Manifest {
            val tok = root["tokenizer"] as Map<String, Any?>
            val special = tok["special_ids"] as Map<String, Any?>
            fun int(m: Map<String, Any?>, k: String): Int = (m[k] as Number).toInt()
            val spec = TokenizerSpec(
                int(special, "bos"), int(special, "pad"), int(special, "eos"), int(special, "unk"),
                int(special, "mask"), int(tok, "sp_unk_id"), int(tok, "id_offset"), keptIds
            )
            val model = (root["models"] as List<Map<String, Any?>>).first { it["format"] == format }
            val sigs = (model["signatures"] as List<Map<String, Any?>>)
                .map { Signature(it["name"] as String, int(it, "seq_len")) }
                .sortedBy { it.seqLen }
            return Manifest(spec, sigs, int(root, "hidden_size"))
        }
    }
}

object EdgeM3Core {
    /** Step 1: SentencePiece ids of the text's pieces -> model vocabulary ids, <s> ... </s>. */
    fun mapPieces(spec: TokenizerSpec, pieces: IntArray): IntArray {
        val out = IntArray(pieces.size + 2)
        out[0] = spec.bos
        for (i in pieces.indices) {
            out[i + 1] = if (pieces[i] == spec.spUnkId) spec.unk else pieces[i] + spec.idOffset
        }
        out[out.size - 1] = spec.eos
        return out
    }

    /** Step 2: the smallest signature that holds the ids, else the largest (and truncate). */
    fun chooseSignature(manifest: Manifest, nTokens: Int): Signature =
        manifest.signatures.firstOrNull { it.seqLen >= nTokens } ?: manifest.signatures.last()

    /** Step 2: truncation keeps </s>. */
    fun truncate(spec: TokenizerSpec, ids: IntArray, maxLength: Int): IntArray {
        if (ids.size <= maxLength) return ids
        val out = ids.copyOf(maxLength)
        out[maxLength - 1] = spec.eos
        return out
    }

    /** Trimmed vocabularies: original id -> embedding row (ids not kept -> the <unk> row). */
    fun toModelIds(spec: TokenizerSpec, ids: IntArray): IntArray {
        val kept = spec.keptIds ?: return ids
        val unkRow = java.util.Arrays.binarySearch(kept, spec.unk)
        return IntArray(ids.size) { i ->
            val row = java.util.Arrays.binarySearch(kept, ids[i])
            if (row >= 0) row else unkRow
        }
    }

    /** Step 3: pad to the signature length; attention mask 1 on real tokens. */
    fun pad(spec: TokenizerSpec, ids: IntArray, seqLen: Int): Pair<IntArray, IntArray> {
        val padded = IntArray(seqLen) { if (it < ids.size) ids[it] else spec.pad }
        val mask = IntArray(seqLen) { if (it < ids.size) 1 else 0 }
        return Pair(padded, mask)
    }

    /** Step 5: max weight per original id over real tokens; specials and w <= 0 dropped. */
    fun lexicalWeights(spec: TokenizerSpec, ids: IntArray, sparse: FloatArray): Map<String, Float> {
        val skipRows = toModelIds(spec, intArrayOf(spec.bos, spec.eos, spec.pad, spec.unk)).toSet()
        val rows = toModelIds(spec, ids)
        val out = LinkedHashMap<String, Float>()
        for (i in ids.indices) {
            if (rows[i] in skipRows) continue
            val w = sparse[i]
            if (w <= 0f) continue
            val key = ids[i].toString()
            val prev = out[key]
            if (prev == null || w > prev) out[key] = w
        }
        return out
    }

    /** Step 5: one ColBERT vector per real token after <s> (</s> included). */
    fun colbertVectors(colbert: Array<FloatArray>, nTokens: Int): Array<FloatArray> =
        colbert.copyOfRange(0, maxOf(nTokens - 1, 0))
}
