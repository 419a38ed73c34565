import Foundation

// The device pipeline of docs/bundle-format.md in plain Swift (Foundation only): manifest model,
// token ids, signature choice, padding, post-processing and golden comparison.
// A line-for-line mirror of android_assets/src/main/java/dev/edgem3/EdgeM3Core.kt, which CI
// compiles and runs against a real bundle's golden.json; no Swift toolchain runs in CI, so
// change both files together and keep the same names, order and branches.
// Reference: edge_m3/tokenizer.py, edge_m3/pipeline.py, edge_m3/postprocess.py.

/// A bundle or input that breaks the contract; the message names the file or field.
public struct EdgeM3Error: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { return message }
}

/// Typed access to parsed JSON trees (MiniJson's, or JSONSerialization's).
public enum JsonTree {
    public static func obj(_ x: Any?, _ w: String) throws -> [String: Any] {
        guard let m = x as? [String: Any] else { throw EdgeM3Error("\(w): expected a JSON object") }
        return m
    }

    public static func list(_ x: Any?, _ w: String) throws -> [Any] {
        guard let l = x as? [Any] else { throw EdgeM3Error("\(w): expected a JSON array") }
        return l
    }

    public static func field(_ tree: [String: Any], _ key: String, _ w: String) throws -> Any {
        guard let v = tree[key] else { throw EdgeM3Error("\(w): missing \"\(key)\"") }
        return v
    }

    /// Kotlin's `tree[key]`: nil for a missing key and for JSON null.
    public static func opt(_ tree: [String: Any], _ key: String) -> Any? {
        guard let v = tree[key], !(v is NSNull) else { return nil }
        return v
    }

    public static func str(_ x: Any?, _ w: String) throws -> String {
        guard let s = x as? String else { throw EdgeM3Error("\(w): expected a string") }
        return s
    }

    static func number(_ x: Any?) -> Double? {
        if let i = x as? Int { return Double(i) }
        if let d = x as? Double { return d }
        if let n = x as? NSNumber { return n.doubleValue }
        return nil
    }

    public static func int(_ x: Any?, _ w: String) throws -> Int {
        guard let d = number(x) else { throw EdgeM3Error("\(w): expected an integer") }
        if d != d.rounded(.down) || d < Double(Int32.min) || d > Double(Int32.max) {
            throw EdgeM3Error("\(w): expected an integer, got \(d)")
        }
        return Int(d)
    }

    public static func float(_ x: Any?, _ w: String) throws -> Float {
        guard let d = number(x) else { throw EdgeM3Error("\(w): expected a number") }
        return Float(d)  // the double nearest the text, then float32: bit exact
    }

    public static func ints(_ x: Any?, _ w: String) throws -> [Int] {
        let l = try list(x, w)
        return try l.indices.map { try int(l[$0], "\(w)[\($0)]") }
    }

    public static func floats(_ x: Any?, _ w: String) throws -> [Float] {
        let l = try list(x, w)
        return try l.indices.map { try float(l[$0], "\(w)[\($0)]") }
    }

    public static func matrix(_ x: Any?, _ w: String) throws -> [[Float]] {
        let l = try list(x, w)
        return try l.indices.map { try floats(l[$0], "\(w)[\($0)]") }
    }
}

public struct SpecialIds {
    public let bos: Int, pad: Int, eos: Int, unk: Int, mask: Int

    /// What lexical weights leave out: FlagEmbedding drops <s>, </s>, <pad>, <unk>, keeps <mask>.
    public func skip() -> Set<Int> { return [bos, eos, pad, unk] }
}

public struct TokenizerSpec {
    public let file: String
    public let special: SpecialIds
    public let spUnkId: Int
    public let idOffset: Int
    public let vocabSize: Int
    public let vocabMapFile: String?
}

public struct TensorSpec {
    public let name: String
    public let shape: [Int]
    public let dtype: String
}

public struct Signature {
    public let name: String
    public let seqLen: Int
    public let inputs: [TensorSpec]
    public let outputs: [TensorSpec]

    public func output(_ name: String) -> TensorSpec? { return outputs.first { $0.name == name } }
}

public struct ModelEntry {
    public let format: String
    public let file: String
    public let quant: String
    public let signatures: [Signature]

    public func signature(_ name: String) throws -> Signature {
        for s in signatures where s.name == name { return s }
        throw EdgeM3Error("manifest.json: \(file) has no signature \(name)")
    }
}

public struct FileEntry {
    public let sha256: String
    public let size: Int64
}

public struct Manifest {
    public static let SCHEMA_VERSION = 1

    public let schemaVersion: Int
    public let quant: String
    public let hiddenSize: Int
    public let maxLength: Int
    public let heads: [String]
    public let tokenizer: TokenizerSpec
    public let models: [ModelEntry]
    public let files: [String: FileEntry]

    /// The model entry of `format` ("tflite" for the Android and iOS kits).
    public func model(_ format: String) throws -> ModelEntry {
        for m in models where m.format == format { return m }
        throw EdgeM3Error("manifest.json: no \(format) model (has \(models.map { $0.format }))")
    }

    public static func fromJson(_ tree: Any?) throws -> Manifest {
        let w = "manifest.json"
        let t = try JsonTree.obj(tree, w)
        let version = try JsonTree.int(JsonTree.field(t, "schema_version", w), "\(w): schema_version")
        if version != SCHEMA_VERSION {
            throw EdgeM3Error("\(w): schema_version \(version), this kit reads \(SCHEMA_VERSION)")
        }
        let tok = try JsonTree.obj(JsonTree.field(t, "tokenizer", w), "\(w): tokenizer")
        let sp = try JsonTree.obj(JsonTree.field(tok, "special_ids", "\(w): tokenizer"), "\(w): special_ids")
        func special(_ k: String) throws -> Int {
            return try JsonTree.int(JsonTree.field(sp, k, "\(w): special_ids"), "\(w): special_ids.\(k)")
        }
        var vocabMapFile: String? = nil  // Swift allows no `try` inside `?:`
        if let vocabMap = JsonTree.opt(tok, "vocab_map") {
            vocabMapFile = try JsonTree.str(
                JsonTree.field(JsonTree.obj(vocabMap, "\(w): vocab_map"), "file", "\(w): vocab_map"),
                "\(w): vocab_map.file")
        }
        let tokenizer = TokenizerSpec(
            file: try JsonTree.str(JsonTree.field(tok, "file", "\(w): tokenizer"), "\(w): tokenizer.file"),
            special: SpecialIds(bos: try special("bos"), pad: try special("pad"), eos: try special("eos"),
                                unk: try special("unk"), mask: try special("mask")),
            spUnkId: try JsonTree.int(JsonTree.field(tok, "sp_unk_id", "\(w): tokenizer"), "\(w): sp_unk_id"),
            idOffset: try JsonTree.int(JsonTree.field(tok, "id_offset", "\(w): tokenizer"), "\(w): id_offset"),
            vocabSize: try JsonTree.int(JsonTree.field(tok, "vocab_size", "\(w): tokenizer"), "\(w): vocab_size"),
            vocabMapFile: vocabMapFile
        )
        let modelList = try JsonTree.list(JsonTree.field(t, "models", w), "\(w): models")
        let models = try modelList.indices.map { i in
            try parseModel(JsonTree.obj(modelList[i], "\(w): models[\(i)]"), "\(w): models[\(i)]")
        }
        var files = [String: FileEntry]()
        if let fileTree = JsonTree.opt(t, "files") {
            for (name, e) in try JsonTree.obj(fileTree, "\(w): files") {
                let f = try JsonTree.obj(e, "\(w): files.\(name)")
                files[name] = FileEntry(sha256: try JsonTree.str(JsonTree.opt(f, "sha256"), "\(w): files.\(name).sha256"),
                                        size: Int64(try JsonTree.int(JsonTree.opt(f, "size"), "\(w): files.\(name).size")))
            }
        }
        return Manifest(
            schemaVersion: version,
            quant: try JsonTree.str(JsonTree.field(t, "quant", w), "\(w): quant"),
            hiddenSize: try JsonTree.int(JsonTree.field(t, "hidden_size", w), "\(w): hidden_size"),
            maxLength: try JsonTree.int(JsonTree.field(t, "max_length", w), "\(w): max_length"),
            heads: try JsonTree.list(JsonTree.field(t, "heads", w), "\(w): heads").map { try JsonTree.str($0, "\(w): heads") },
            tokenizer: tokenizer, models: models, files: files
        )
    }

    private static func parseModel(_ m: [String: Any], _ w: String) throws -> ModelEntry {
        let sigList = try JsonTree.list(JsonTree.field(m, "signatures", w), "\(w): signatures")
        let sigs = try sigList.indices.map { i -> Signature in
            let st = try JsonTree.obj(sigList[i], "\(w): signatures[\(i)]")
            let sw = "\(w): signatures[\(i)]"
            return Signature(
                name: try JsonTree.str(JsonTree.field(st, "name", sw), "\(sw).name"),
                seqLen: try JsonTree.int(JsonTree.field(st, "seq_len", sw), "\(sw).seq_len"),
                inputs: try parseTensors(JsonTree.opt(st, "inputs"), "\(sw).inputs"),
                outputs: try parseTensors(JsonTree.opt(st, "outputs"), "\(sw).outputs")
            )
        }
        if sigs.isEmpty { throw EdgeM3Error("\(w): no signatures") }
        return ModelEntry(
            format: try JsonTree.str(JsonTree.field(m, "format", w), "\(w).format"),
            file: try JsonTree.str(JsonTree.field(m, "file", w), "\(w).file"),
            quant: try JsonTree.str(JsonTree.opt(m, "quant") ?? "", "\(w).quant"),
            signatures: sigs.sorted { $0.seqLen < $1.seqLen }
        )
    }

    private static func parseTensors(_ x: Any?, _ w: String) throws -> [TensorSpec] {
        if x == nil { return [] }
        let l = try JsonTree.list(x, w)
        return try l.indices.map { i in
            let t = try JsonTree.obj(l[i], "\(w)[\(i)]")
            return TensorSpec(name: try JsonTree.str(JsonTree.opt(t, "name"), "\(w)[\(i)].name"),
                              shape: try JsonTree.ints(JsonTree.opt(t, "shape"), "\(w)[\(i)].shape"),
                              dtype: try JsonTree.str(JsonTree.opt(t, "dtype"), "\(w)[\(i)].dtype"))
        }
    }
}

/// Original id -> row of a trimmed embedding table (vocab_map.json); ids not kept -> the <unk> row.
public struct VocabMap {
    public let keptIds: [Int]
    public private(set) var unkRow: Int = 0

    public init(keptIds: [Int], special: SpecialIds) {
        self.keptIds = keptIds
        self.unkRow = row(special.unk)
    }

    /// Binary search in the sorted kept ids; the <unk> row when absent (edge_m3.vocab.row_map).
    public func row(_ id: Int) -> Int {
        var lo = 0
        var hi = keptIds.count - 1
        while lo <= hi {
            let mid = (lo + hi) >> 1
            let v = keptIds[mid]
            if v < id { lo = mid + 1 } else if v > id { hi = mid - 1 } else { return mid }
        }
        return unkRow
    }

    public func rows(_ ids: [Int]) -> [Int] { return ids.map { row($0) } }

    public static func fromJson(_ tree: Any?, _ tokenizer: TokenizerSpec) throws -> VocabMap {
        let w = tokenizer.vocabMapFile ?? "vocab_map.json"
        let kept = try JsonTree.ints(JsonTree.field(JsonTree.obj(tree, w), "kept_ids", w), "\(w): kept_ids")
        for i in kept.indices {
            if kept[i] < 0 || kept[i] >= tokenizer.vocabSize || (i > 0 && kept[i] <= kept[i - 1]) {
                throw EdgeM3Error("\(w): kept ids must be sorted, unique and < \(tokenizer.vocabSize)")
            }
        }
        let s = tokenizer.special
        for id in [s.bos, s.pad, s.eos, s.unk] {
            if !kept.contains(id) { throw EdgeM3Error("\(w): kept ids lack the special id \(id)") }
        }
        return VocabMap(keptIds: kept, special: s)
    }
}

/// One text's ids (original vocabulary, truncated, unpadded) and the signature that runs them.
public struct Encoded {
    public let inputIds: [Int]
    public let signature: Signature
}

/// A signature's outputs as the runtime fills them: batch of one, nil for a head not exported.
public struct RawOutputs {
    public let denseVecs: [[Float]]?
    public let sparseWeights: [[Float]]?
    public let colbertVecs: [[[Float]]]?
}

/// FlagEmbedding's outputs for one text, plus the ids and the signature used.
public struct Embedding {
    public let inputIds: [Int]
    public let signature: String
    public let seqLen: Int
    public let denseVecs: [Float]?
    public let lexicalWeights: [String: Float]?
    public let colbertVecs: [[Float]]?
}

/// Any SentencePiece binding: plain SentencePiece ids (no <s>/</s>, no offset, no sampling).
public protocol PieceEncoder {
    func encodeAsIds(_ text: String) throws -> [Int]
}

/// Runs one signature on `[1, L]` int32 ids and mask (a TFLite interpreter, or a replay in tests).
public protocol ModelRunner {
    func run(_ signature: Signature, _ inputIds: [Int], _ attentionMask: [Int]) throws -> RawOutputs
}

public enum EdgeM3Core {
    /// Step 1: SentencePiece ids -> `<s> pieces </s>` in XLM-R ids (`sp_unk_id` -> unk, else + offset).
    public static func toModelIds(_ pieces: [Int], _ tok: TokenizerSpec) -> [Int] {
        var out = [Int](repeating: 0, count: pieces.count + 2)
        out[0] = tok.special.bos
        for i in pieces.indices {
            let p = pieces[i]
            out[i + 1] = p == tok.spUnkId ? tok.special.unk : p + tok.idOffset
        }
        out[out.count - 1] = tok.special.eos
        return out
    }

    /// Step 2, too long: keep the first `maxLen - 1` ids and end with `</s>`.
    public static func truncate(_ ids: [Int], _ maxLen: Int, _ eos: Int) throws -> [Int] {
        if maxLen < 2 { throw EdgeM3Error("max length \(maxLen): must be at least 2") }
        if ids.count <= maxLen { return ids }
        var out = Array(ids[0..<maxLen])
        out[maxLen - 1] = eos
        return out
    }

    /// Step 2: the smallest signature that holds `nTokens`, else the largest.
    public static func chooseSignature(_ nTokens: Int, _ signatures: [Signature]) throws -> Signature {
        if signatures.isEmpty { throw EdgeM3Error("manifest.json: the model has no signatures") }
        var best: Signature? = nil
        var largest = signatures[0]
        for s in signatures {
            if s.seqLen > largest.seqLen { largest = s }
            if s.seqLen >= nTokens && (best == nil || s.seqLen < best!.seqLen) { best = s }
        }
        return best ?? largest
    }

    /// Steps 1-2: ids truncated to the largest signature, and the signature to run.
    public static func encode(_ pieces: [Int], _ tok: TokenizerSpec, _ signatures: [Signature]) throws -> Encoded {
        let largest = try chooseSignature(Int.max, signatures)
        let ids = try truncate(toModelIds(pieces, tok), largest.seqLen, tok.special.eos)
        return Encoded(inputIds: ids, signature: try chooseSignature(ids.count, signatures))
    }

    /// Step 3: ids padded with `pad` to `seqLen`.
    public static func padIds(_ ids: [Int], _ seqLen: Int, _ pad: Int) throws -> [Int] {
        if ids.count > seqLen { throw EdgeM3Error("\(ids.count) tokens do not fit length \(seqLen)") }
        var out = [Int](repeating: pad, count: seqLen)
        for i in ids.indices { out[i] = ids[i] }
        return out
    }

    /// Step 3: 1 for the `n` real tokens, 0 for pads.
    public static func attentionMask(_ n: Int, _ seqLen: Int) -> [Int] {
        return (0..<seqLen).map { $0 < n ? 1 : 0 }
    }

    /// Step 5: max weight per id over the real tokens; skipped ids and weights <= 0 left out.
    public static func lexicalWeights(_ ids: [Int], _ sparse: [Float], _ skip: Set<Int>, _ keys: [Int]) -> [String: Float] {
        var out = [String: Float]()
        for i in ids.indices {
            if skip.contains(ids[i]) { continue }
            let w = sparse[i]
            if w <= 0 { continue }
            let key = String(keys[i])
            let prev = out[key]
            if w > (prev ?? 0) { out[key] = w }  // as Python's `w > out.get(key, 0.0)`: NaN never kept
        }
        return out
    }

    /// Step 5: one vector per real token after `<s>` (`</s>` included).
    public static func colbertVectors(_ colbert: [[Float]], _ n: Int) -> [[Float]] {
        let keep = n - 1 < 0 ? 0 : min(n - 1, colbert.count)
        return Array(colbert[0..<keep])
    }

    /// Step 5 over a signature's raw outputs; `vocab` maps a trimmed table's rows (keys stay original).
    public static func postprocess(_ raw: RawOutputs, _ enc: Encoded, _ special: SpecialIds, _ vocab: VocabMap?) -> Embedding {
        let ids = enc.inputIds
        let rows = vocab == nil ? ids : vocab!.rows(ids)
        let skip = vocab == nil ? special.skip() : Set(special.skip().map { vocab!.row($0) })
        let dense = raw.denseVecs?[0]
        let lexical = raw.sparseWeights.map { lexicalWeights(rows, $0[0], skip, ids) }
        let colbert = raw.colbertVecs.map { colbertVectors($0[0], ids.count) }
        return Embedding(inputIds: ids, signature: enc.signature.name, seqLen: enc.signature.seqLen,
                         denseVecs: dense, lexicalWeights: lexical, colbertVecs: colbert)
    }

    /// Steps 3-5: pad (table rows for a trimmed vocabulary), run the chosen signature, post-process.
    public static func run(_ enc: Encoded, _ manifest: Manifest, _ runner: ModelRunner, _ vocab: VocabMap?) throws -> Embedding {
        let special = manifest.tokenizer.special
        let rows = vocab == nil ? enc.inputIds : vocab!.rows(enc.inputIds)
        let pad = vocab == nil ? special.pad : vocab!.row(special.pad)
        let seqLen = enc.signature.seqLen
        let raw = try runner.run(enc.signature, padIds(rows, seqLen, pad), attentionMask(rows.count, seqLen))
        return postprocess(raw, enc, special, vocab)
    }

    /// Steps 1-5 for one text: what an app calls (not thread-safe when `runner` is not).
    public static func embed(_ text: String, _ manifest: Manifest, _ model: ModelEntry, _ encoder: PieceEncoder,
                             _ runner: ModelRunner, _ vocab: VocabMap?) throws -> Embedding {
        return try run(encode(encoder.encodeAsIds(text), manifest.tokenizer, model.signatures), manifest, runner, vocab)
    }

    // ---- golden.json: exact checks of ids / signature / post-processing, tolerant ones of live outputs

    public struct GoldenCase {
        public let text: String
        public let expected: Embedding
        public let raw: RawOutputs
    }

    public struct Golden {
        public let quant: String
        public let modelFile: String
        public let cases: [GoldenCase]
    }

    /// Live-output tolerance: the same model file on another CPU differs by kernel rounding only.
    public struct Tolerance {
        public let denseCosineMin: Double
        public let maxAbs: Float
    }

    public static func toleranceFor(_ quant: String) -> Tolerance {
        switch quant {
        case "fp32": return Tolerance(denseCosineMin: 0.99999, maxAbs: 1e-3)
        case "fp16": return Tolerance(denseCosineMin: 0.9999, maxAbs: 5e-3)
        default: return Tolerance(denseCosineMin: 0.999, maxAbs: 5e-2)
        }
    }

    public static func parseGolden(_ tree: Any?) throws -> Golden {
        let w = "golden.json"
        let t = try JsonTree.obj(tree, w)
        let caseList = try JsonTree.list(JsonTree.field(t, "cases", w), "\(w): cases")
        let cases = try caseList.indices.map { i -> GoldenCase in
            let cw = "\(w): cases[\(i)]"
            let ct = try JsonTree.obj(caseList[i], cw)
            let rt = try JsonTree.obj(JsonTree.field(ct, "raw", cw), "\(cw).raw")
            let raw = RawOutputs(
                denseVecs: try JsonTree.opt(rt, "dense_vecs").map { try JsonTree.matrix($0, "\(cw).raw.dense_vecs") },
                sparseWeights: try JsonTree.opt(rt, "sparse_weights").map { try JsonTree.matrix($0, "\(cw).raw.sparse_weights") },
                colbertVecs: try JsonTree.opt(rt, "colbert_vecs").map { x -> [[[Float]]] in
                    let l = try JsonTree.list(x, "\(cw).raw.colbert_vecs")
                    return try l.indices.map { try JsonTree.matrix(l[$0], "\(cw).raw.colbert_vecs[\($0)]") }
                }
            )
            let lex = try JsonTree.opt(ct, "lexical_weights").map { x -> [String: Float] in
                var m = [String: Float]()
                for (k, v) in try JsonTree.obj(x, "\(cw).lexical_weights") { m[k] = try JsonTree.float(v, "\(cw).lexical_weights.\(k)") }
                return m
            }
            let expected = Embedding(
                inputIds: try JsonTree.ints(JsonTree.field(ct, "input_ids", cw), "\(cw).input_ids"),
                signature: try JsonTree.str(JsonTree.field(ct, "signature", cw), "\(cw).signature"),
                seqLen: try JsonTree.int(JsonTree.field(ct, "seq_len", cw), "\(cw).seq_len"),
                denseVecs: try JsonTree.opt(ct, "dense_vecs").map { try JsonTree.floats($0, "\(cw).dense_vecs") },
                lexicalWeights: lex,
                colbertVecs: try JsonTree.opt(ct, "colbert_vecs").map { try JsonTree.matrix($0, "\(cw).colbert_vecs") }
            )
            return GoldenCase(text: try JsonTree.str(JsonTree.field(ct, "text", cw), "\(cw).text"), expected: expected, raw: raw)
        }
        return Golden(quant: try JsonTree.str(JsonTree.opt(t, "quant") ?? "", "\(w): quant"),
                      modelFile: try JsonTree.str(JsonTree.opt(t, "model_file") ?? "", "\(w): model_file"),
                      cases: cases)
    }

    /// Problems between two embeddings that must agree bit for bit (empty list: identical).
    public static func compareExact(_ actual: Embedding, _ expected: Embedding) -> [String] {
        var out = [String]()
        if actual.inputIds != expected.inputIds {
            out.append("input_ids \(actual.inputIds) != \(expected.inputIds)")
        }
        if actual.signature != expected.signature || actual.seqLen != expected.seqLen {
            out.append("signature \(actual.signature)/\(actual.seqLen) != \(expected.signature)/\(expected.seqLen)")
        }
        compareVectors("dense_vecs", actual.denseVecs, expected.denseVecs, 0, &out)
        let a = actual.lexicalWeights
        let e = expected.lexicalWeights
        if (a == nil) != (e == nil) {
            out.append("lexical_weights present \(a != nil) != \(e != nil)")
        } else if let a = a, let e = e {
            if Set(a.keys) != Set(e.keys) { out.append("lexical_weights keys \(a.keys.sorted()) != \(e.keys.sorted())") }
            for (k, v) in e {
                if let got = a[k], got != v { out.append("lexical_weights[\(k)] \(got) != \(v)") }
            }
        }
        compareMatrices(actual.colbertVecs, expected.colbertVecs, 0, &out)
        return out
    }

    /// Problems beyond `tol` between live outputs and the golden ones (ids and signature still exact).
    public static func compareWithin(_ actual: Embedding, _ expected: Embedding, _ tol: Tolerance) -> [String] {
        var out = [String]()
        if actual.inputIds != expected.inputIds { out.append("input_ids differ") }
        if actual.signature != expected.signature { out.append("signature \(actual.signature) != \(expected.signature)") }
        let ad = actual.denseVecs
        let ed = expected.denseVecs
        if let ad = ad, let ed = ed, ad.count == ed.count {
            let cos = cosine(ad, ed)
            if cos < tol.denseCosineMin { out.append("dense_vecs cosine \(cos) < \(tol.denseCosineMin)") }
        }
        compareVectors("dense_vecs", ad, ed, tol.maxAbs, &out)
        let a = actual.lexicalWeights
        let e = expected.lexicalWeights
        if let a = a, let e = e {
            // A weight near 0 may fall on either side of relu: compare over both key sets, missing = 0.
            for k in Set(a.keys).union(e.keys) {
                let d = abs((a[k] ?? 0) - (e[k] ?? 0))
                if d > tol.maxAbs { out.append("lexical_weights[\(k)] differs by \(d) > \(tol.maxAbs)") }
            }
        } else if (a == nil) != (e == nil) {
            out.append("lexical_weights present \(a != nil) != \(e != nil)")
        }
        compareMatrices(actual.colbertVecs, expected.colbertVecs, tol.maxAbs, &out)
        return out
    }

    public static func cosine(_ a: [Float], _ b: [Float]) -> Double {
        var ab = 0.0
        var aa = 0.0
        var bb = 0.0
        for i in a.indices {
            ab += Double(a[i]) * Double(b[i])
            aa += Double(a[i]) * Double(a[i])
            bb += Double(b[i]) * Double(b[i])
        }
        return aa == 0 || bb == 0 ? 0 : ab / (aa * bb).squareRoot()
    }

    private static func compareVectors(_ name: String, _ a: [Float]?, _ e: [Float]?, _ atol: Float, _ out: inout [String]) {
        if a == nil && e == nil { return }
        guard let a = a, let e = e, a.count == e.count else {
            out.append("\(name) shape \(String(describing: a?.count)) != \(String(describing: e?.count))")
            return
        }
        for i in a.indices {
            let bad = atol == 0 ? a[i] != e[i] : !(abs(a[i] - e[i]) <= atol)
            if bad {
                out.append("\(name)[\(i)] \(a[i]) != \(e[i])")
                return
            }
        }
    }

    private static func compareMatrices(_ a: [[Float]]?, _ e: [[Float]]?, _ atol: Float, _ out: inout [String]) {
        if a == nil && e == nil { return }
        guard let a = a, let e = e, a.count == e.count else {
            out.append("colbert_vecs rows \(String(describing: a?.count)) != \(String(describing: e?.count))")
            return
        }
        for r in a.indices { compareVectors("colbert_vecs[\(r)]", a[r], e[r], atol, &out) }
    }
}
