package dev.edgem3

// DRAFT until edge_m3/contract.py has the score rules: replaced by EdgeM3Contract (generated).
object ContractDraft {
    const val INDEX_FORMAT = "edge-m3-index"
    const val INDEX_MANIFEST = "index.json"
    const val INDEX_IDS = "ids.json"
    const val INDEX_FORMAT_VERSION = 1
    const val HYBRID_CANDIDATES = 100
    val SCORE_SIGNALS: List<String> = listOf("dense", "sparse", "colbert")
    val SCORE_MODES: List<String> = listOf("dense", "sparse", "colbert", "sparse+dense", "colbert+sparse+dense")
    val DENSE_STORES: List<String> = listOf("float32", "int8")
    val COLBERT_STORES: List<String> = listOf("fp16", "int8", "none")
    val DEFAULT_MODE_WEIGHTS: List<Double> = listOf(1.0, 1.0, 1.0)
    val INDEX_ARRAYS: Map<String, String> = mapOf("dense" to "dense.bin", "dense_scale" to "dense_scale.bin", "sparse_tokens" to "sparse_tokens.bin", "sparse_offsets" to "sparse_offsets.bin", "sparse_rows" to "sparse_rows.bin", "sparse_weights" to "sparse_weights.bin", "colbert_offsets" to "colbert_offsets.bin", "colbert" to "colbert.bin", "colbert_scale" to "colbert_scale.bin")
}
