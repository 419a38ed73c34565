package dev.edgem3

// vocab_map.json of a trimmed bundle (edge_m3/tokenizer/vocab.py): original ids -> table rows.

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
