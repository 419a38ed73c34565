// DRAFT until edge_m3/contract.py has the score rules: replaced by EdgeM3Contract (generated).
enum ContractDraft {
    static let indexFormat = "edge-m3-index"
    static let indexManifest = "index.json"
    static let indexIds = "ids.json"
    static let indexFormatVersion = 1
    static let hybridCandidates = 100
    static let scoreSignals: [String] = ["dense", "sparse", "colbert"]
    static let scoreModes: [String] = ["dense", "sparse", "colbert", "sparse+dense", "colbert+sparse+dense"]
    static let denseStores: [String] = ["float32", "int8"]
    static let colbertStores: [String] = ["fp16", "int8", "none"]
    static let defaultModeWeights: [Double] = [1.0, 1.0, 1.0]
    static let indexArrays: [String: String] = ["dense": "dense.bin", "dense_scale": "dense_scale.bin", "sparse_tokens": "sparse_tokens.bin", "sparse_offsets": "sparse_offsets.bin", "sparse_rows": "sparse_rows.bin", "sparse_weights": "sparse_weights.bin", "colbert_offsets": "colbert_offsets.bin", "colbert": "colbert.bin", "colbert_scale": "colbert_scale.bin"]
}
