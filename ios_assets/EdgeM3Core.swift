// Line-for-line mirror of android_assets/src/main/kotlin/edge_m3/EdgeM3Core.kt.
// No Swift toolchain runs here, so this file is not compiled in CI: the Kotlin original is,
// against golden.json. Keep both in step when either changes.
import Foundation

struct TokenizerSpec {
    let bos: Int, pad: Int, eos: Int, unk: Int, mask: Int
    let spUnkId: Int, idOffset: Int
    let keptIds: [Int]?
}

struct Signature { let name: String; let seqLen: Int }

struct Manifest {
    let tokenizer: TokenizerSpec
    let signatures: [Signature]
    let hiddenSize: Int

    /// Parse manifest.json (decoded with JSONSerialization).
    static func fromJson(_ root: [String: Any], format: String = "tflite", keptIds: [Int]? = nil) -> Manifest {
        let tok = root["tokenizer"] as! [String: Any]
        let special = tok["special_ids"] as! [String: Any]
        func int(_ m: [String: Any], _ k: String) -> Int { (m[k] as! NSNumber).intValue }
        let spec = TokenizerSpec(
            bos: int(special, "bos"), pad: int(special, "pad"), eos: int(special, "eos"), unk: int(special, "unk"),
            mask: int(special, "mask"), spUnkId: int(tok, "sp_unk_id"), idOffset: int(tok, "id_offset"), keptIds: keptIds
        )
        let model = (root["models"] as! [[String: Any]]).first { ($0["format"] as! String) == format }!
        let sigs = (model["signatures"] as! [[String: Any]])
            .map { Signature(name: $0["name"] as! String, seqLen: int($0, "seq_len")) }
            .sorted { $0.seqLen < $1.seqLen }
        return Manifest(tokenizer: spec, signatures: sigs, hiddenSize: int(root, "hidden_size"))
    }
}

enum EdgeM3Core {
    /// Step 1: SentencePiece ids of the text's pieces -> model vocabulary ids, <s> ... </s>.
    static func mapPieces(_ spec: TokenizerSpec, _ pieces: [Int]) -> [Int] {
        var out = [Int](repeating: 0, count: pieces.count + 2)
        out[0] = spec.bos
        for i in pieces.indices {
            out[i + 1] = pieces[i] == spec.spUnkId ? spec.unk : pieces[i] + spec.idOffset
        }
        out[out.count - 1] = spec.eos
        return out
    }

    /// Step 2: the smallest signature that holds the ids, else the largest (and truncate).
    static func chooseSignature(_ manifest: Manifest, _ nTokens: Int) -> Signature {
        manifest.signatures.first { $0.seqLen >= nTokens } ?? manifest.signatures.last!
    }

    /// Step 2: truncation keeps </s>.
    static func truncate(_ spec: TokenizerSpec, _ ids: [Int], _ maxLength: Int) -> [Int] {
        if ids.count <= maxLength { return ids }
        var out = Array(ids[0..<maxLength])
        out[maxLength - 1] = spec.eos
        return out
    }

    /// Trimmed vocabularies: original id -> embedding row (ids not kept -> the <unk> row).
    static func toModelIds(_ spec: TokenizerSpec, _ ids: [Int]) -> [Int] {
        guard let kept = spec.keptIds else { return ids }
        let index = Dictionary(uniqueKeysWithValues: kept.enumerated().map { ($1, $0) })
        let unkRow = index[spec.unk]!
        return ids.map { index[$0] ?? unkRow }
    }

    /// Step 3: pad to the signature length; attention mask 1 on real tokens.
    static func pad(_ spec: TokenizerSpec, _ ids: [Int], _ seqLen: Int) -> ([Int32], [Int32]) {
        let padded = (0..<seqLen).map { Int32($0 < ids.count ? ids[$0] : spec.pad) }
        let mask = (0..<seqLen).map { Int32($0 < ids.count ? 1 : 0) }
        return (padded, mask)
    }

    /// Step 5: max weight per original id over real tokens; specials and w <= 0 dropped.
    static func lexicalWeights(_ spec: TokenizerSpec, _ ids: [Int], _ sparse: [Float]) -> [String: Float] {
        let skipRows = Set(toModelIds(spec, [spec.bos, spec.eos, spec.pad, spec.unk]))
        let rows = toModelIds(spec, ids)
        var out = [String: Float]()
        for i in ids.indices {
            if skipRows.contains(rows[i]) { continue }
            let w = sparse[i]
            if w <= 0 { continue }
            let key = String(ids[i])
            if let prev = out[key], prev >= w { continue }
            out[key] = w
        }
        return out
    }

    /// Step 5: one ColBERT vector per real token after <s> (</s> included).
    static func colbertVectors(_ colbert: [[Float]], _ nTokens: Int) -> [[Float]] {
        Array(colbert[0..<max(nTokens - 1, 0)])
    }
}
