import Foundation

// The device pipeline of docs/bundle-format.md in plain Swift (Foundation only): token ids (the
// kit's XlmrTokenizer), signature choice, padding, post-processing and the golden comparison. The same steps as
// android_assets/src/main/java/dev/edgem3/EdgeM3Core.kt; both kits replay a real bundle's
// golden.json in CI (tests/test_kits.py, tests/test_swift_kit.py).
// Reference: edge_m3/tokenizer/, edge_m3/runtime/pipeline.py, edge_m3/runtime/postprocess.py;
// names and tolerances: EdgeM3Contract.swift, generated from edge_m3/contract.py.

/// One text's ids (original vocabulary, truncated, unpadded) and the signature that runs them.
public struct Encoded: Hashable, Sendable {
    public var inputIds: [Int]
    public var signature: Signature

    public init(inputIds: [Int], signature: Signature) {
        self.inputIds = inputIds
        self.signature = signature
    }
}

/// FlagEmbedding's outputs for one text, plus the ids and the signature used.
public struct Embedding: Hashable, Sendable {
    public var inputIds: [Int]
    public var signature: String
    public var seqLen: Int
    /// `[H]`, L2-normalised.
    public var denseVecs: [Float]?
    /// Token id (original vocabulary, as a string: FlagEmbedding's keys) -> weight.
    public var lexicalWeights: [String: Float]?
    /// One L2-normalised vector per real token after `<s>`.
    public var colbertVecs: [[Float]]?

    public init(inputIds: [Int], signature: String, seqLen: Int, denseVecs: [Float]?,
                lexicalWeights: [String: Float]?, colbertVecs: [[Float]]?) {
        self.inputIds = inputIds
        self.signature = signature
        self.seqLen = seqLen
        self.denseVecs = denseVecs
        self.lexicalWeights = lexicalWeights
        self.colbertVecs = colbertVecs
    }
}

/// Steps 1-5 for one bundle: value type, safe to share; the model itself runs in a `ModelRunner`.
public struct Pipeline: Hashable, Sendable {
    public let manifest: Manifest
    public let model: ModelEntry
    /// The trimmed vocabulary's row map; nil: model rows are the ids themselves.
    public let vocab: VocabMap?

    public init(manifest: Manifest, vocab: VocabMap? = nil, format: String = "tflite") throws {
        if manifest.tokenizer.vocabMapFile != nil && vocab == nil {
            throw EdgeM3Error("manifest.json: a trimmed vocabulary needs its \(manifest.tokenizer.vocabMapFile!)")
        }
        self.manifest = manifest
        self.model = try manifest.model(format: format)
        self.vocab = vocab
    }

    /// manifest.json and, for a trimmed vocabulary, vocab_map.json from a bundle folder.
    public init(directory: URL, format: String = "tflite") throws {
        let manifest = try Manifest(contentsOf: directory.appendingPathComponent(EdgeM3Contract.manifest))
        let vocab = try manifest.tokenizer.vocabMapFile.map {
            try VocabMap(contentsOf: directory.appendingPathComponent($0), tokenizer: manifest.tokenizer)
        }
        try self.init(manifest: manifest, vocab: vocab, format: format)
    }

    public var special: SpecialIds { manifest.tokenizer.special }

    /// Steps 1-2 as edge_m3/runtime/pipeline.py: the text's ids truncated to the longest signature
    /// (keeping `</s>`), and the smallest signature that holds them.
    public func encode(_ text: String, tokenizer: XlmrTokenizer) throws -> Encoded {
        try encode(ids: tokenizer.encode(text, maxLength: model.longest.seqLen))
    }

    /// The same for raw UTF-16 (an NSString's code units, which may hold lone surrogates; a Swift
    /// String never does): a lone surrogate throws the Python pipeline's error.
    public func encode(utf16 units: [UInt16], tokenizer: XlmrTokenizer) throws -> Encoded {
        try encode(ids: tokenizer.encode(utf16: units, maxLength: model.longest.seqLen))
    }

    /// Steps 1-2 for ids that are already tokenized and truncated.
    public func encode(ids: [Int]) throws -> Encoded {
        if ids.count > model.longest.seqLen {
            throw EdgeM3Error("\(ids.count) ids do not fit the longest signature (\(model.longest.seqLen))")
        }
        return Encoded(inputIds: ids, signature: model.signature(fitting: ids.count))
    }

    /// The embedding-table row of each id: the id itself, or its trimmed-table row (<unk>'s when dropped).
    public func rows(for ids: [Int]) -> [Int] {
        guard let vocab else { return ids }
        let unkRow = vocab.index(of: special.unk)!  // VocabMap's init checks that every special id is kept
        return ids.map { vocab.index(of: $0) ?? unkRow }
    }

    /// Step 3: table rows padded with `<pad>`'s row to the signature's length, and the mask.
    public func modelInputs(for encoded: Encoded) throws -> (inputIds: [Int32], attentionMask: [Int32]) {
        let rows = self.rows(for: encoded.inputIds)
        let padding = encoded.signature.seqLen - rows.count
        if padding < 0 { throw EdgeM3Error("\(rows.count) tokens do not fit length \(encoded.signature.seqLen)") }
        let pad = Int32(self.rows(for: [special.pad])[0])
        return (rows.map { Int32($0) } + Array(repeating: pad, count: padding),
                Array(repeating: 1, count: rows.count) + Array(repeating: 0, count: padding))
    }

    /// Step 5 over a signature's raw outputs. A trimmed vocabulary skips by table row (so ids it
    /// dropped, which share <unk>'s row, are skipped too); keys stay the original ids.
    public func postprocess(_ raw: RawOutputs, for encoded: Encoded) -> Embedding {
        let ids = encoded.inputIds
        let lexical = raw.sparseWeights.map { sparse -> [String: Float] in
            var out = [String: Float]()
            let skip = Set(rows(for: Array(special.skippedInLexicalWeights)))
            for ((id, row), w) in zip(zip(ids, rows(for: ids)), sparse) where !skip.contains(row) && w > 0 {
                let key = String(id)
                if w > out[key] ?? 0 { out[key] = w }  // as Python's `w > out.get(key, 0.0)`: NaN never kept
            }
            return out
        }
        let colbert = raw.colbertVecs.map { Array($0.prefix(max(ids.count - 1, 0))) }
        return Embedding(inputIds: ids, signature: encoded.signature.name, seqLen: encoded.signature.seqLen,
                         denseVecs: raw.denseVecs, lexicalWeights: lexical, colbertVecs: colbert)
    }

    /// Steps 3-5: pad, run the chosen signature, post-process.
    public func run(_ encoded: Encoded, on runner: any ModelRunner) throws -> Embedding {
        let (inputIds, attentionMask) = try modelInputs(for: encoded)
        let raw = try runner.run(encoded.signature, inputIds: inputIds, attentionMask: attentionMask)
        return postprocess(raw, for: encoded)
    }

    /// Steps 1-5 for one text (not thread-safe when `runner` is not: `EdgeM3Embedder` serialises).
    public func embed(_ text: String, tokenizer: XlmrTokenizer, runner: any ModelRunner) throws -> Embedding {
        try run(encode(text, tokenizer: tokenizer), on: runner)
    }
}

// ---- golden.json: exact checks of ids / signature / post-processing, tolerant ones of live outputs

extension Tolerance {
    /// The variant's device tolerance (EdgeM3Contract, generated from edge_m3/contract.py); an
    /// unknown variant compares exactly, the strictest choice.
    public init(quant: String) {
        self = EdgeM3Contract.tolerances[quant] ?? .exact
    }

    /// Bit for bit: what the recorded outputs' post-processing must meet.
    public static let exact = Tolerance(denseCosineMin: 1, maxAbs: 0)
}

extension Embedding {
    /// What differs from `expected` beyond `tolerance` (empty: they agree). Ids and signature
    /// always compare exactly; with `.exact`, floats compare by bit pattern.
    public func differences(from expected: Embedding, within tolerance: Tolerance = .exact) -> [String] {
        let exact = tolerance == .exact
        var out = [String]()
        if inputIds != expected.inputIds { out.append("input_ids \(inputIds) != \(expected.inputIds)") }
        if signature != expected.signature || seqLen != expected.seqLen {
            out.append("signature \(signature)/\(seqLen) != \(expected.signature)/\(expected.seqLen)")
        }
        if !exact, let a = denseVecs, let e = expected.denseVecs, a.count == e.count {
            let cos = Embedding.cosine(a, e)
            if cos < tolerance.denseCosineMin { out.append("dense_vecs cosine \(cos) < \(tolerance.denseCosineMin)") }
        }
        Embedding.compare(EdgeM3Contract.denseVecs, denseVecs, expected.denseVecs, tolerance.maxAbs, &out)
        switch (lexicalWeights, expected.lexicalWeights) {
        case let (a?, e?) where exact:
            if Set(a.keys) != Set(e.keys) { out.append("lexical_weights keys \(a.keys.sorted()) != \(e.keys.sorted())") }
            for (k, v) in e.sorted(by: { $0.key < $1.key }) {
                if let got = a[k], got.bitPattern != v.bitPattern { out.append("lexical_weights[\(k)] \(got) != \(v)") }
            }
        case let (a?, e?):
            // A weight near 0 may fall on either side of relu: compare over both key sets, missing = 0.
            for k in Set(a.keys).union(e.keys).sorted() {
                let d = abs((a[k] ?? 0) - (e[k] ?? 0))
                if d > tolerance.maxAbs { out.append("lexical_weights[\(k)] differs by \(d) > \(tolerance.maxAbs)") }
            }
        case (nil, nil):
            break
        default:
            out.append("lexical_weights present \(lexicalWeights != nil) != \(expected.lexicalWeights != nil)")
        }
        switch (colbertVecs, expected.colbertVecs) {
        case let (a?, e?) where a.count == e.count:
            for r in a.indices { Embedding.compare("colbert_vecs[\(r)]", a[r], e[r], tolerance.maxAbs, &out) }
        case (nil, nil):
            break
        default:
            out.append("colbert_vecs rows \(colbertVecs?.count as Any) != \(expected.colbertVecs?.count as Any)")
        }
        return out
    }

    public static func cosine(_ a: [Float], _ b: [Float]) -> Double {
        var (ab, aa, bb) = (0.0, 0.0, 0.0)
        for (x, y) in zip(a, b) {
            ab += Double(x) * Double(y)
            aa += Double(x) * Double(x)
            bb += Double(y) * Double(y)
        }
        return aa == 0 || bb == 0 ? 0 : ab / (aa * bb).squareRoot()
    }

    /// The first element of `a` off `e` by more than `atol` (0: a different bit pattern).
    private static func compare(_ name: String, _ a: [Float]?, _ e: [Float]?, _ atol: Float, _ out: inout [String]) {
        if a == nil && e == nil { return }
        guard let a, let e, a.count == e.count else {
            out.append("\(name) shape \(a?.count as Any) != \(e?.count as Any)")
            return
        }
        for i in a.indices where atol == 0 ? a[i].bitPattern != e[i].bitPattern : !(abs(a[i] - e[i]) <= atol) {
            out.append("\(name)[\(i)] \(a[i]) != \(e[i])")
            return
        }
    }
}
