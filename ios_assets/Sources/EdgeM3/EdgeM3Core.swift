import Foundation

// The device pipeline of docs/bundle-format.md in plain Swift (Foundation only): token ids (the
// kit's tokenizer of the manifest's kind, EdgeM3Tokenizer), signature choice, padding, post-processing (the golden comparison is test
// support: Tests/EdgeM3Tests/GoldenCheck.swift). The same steps as
// android_assets/src/main/java/dev/edgem3/EdgeM3Core.kt; both kits replay a real bundle's
// golden.json in CI (tests/test_kits.py, tests/test_swift_kit.py).
// Reference: edge_m3/tokenizer/, edge_m3/runtime/pipeline.py, edge_m3/runtime/postprocess.py;
// names and tolerances: EdgeM3Contract.swift, generated from edge_m3/spec/.

/// One text's ids (original vocabulary, truncated, unpadded) and the signature that runs them.
nonisolated public struct Encoded: Hashable, Sendable {
    public var inputIds: [Int]
    public var signature: Signature

    public init(inputIds: [Int], signature: Signature) {
        self.inputIds = inputIds
        self.signature = signature
    }
}

/// FlagEmbedding's outputs for one text, plus the ids and the signature used.
nonisolated public struct Embedding: Hashable, Sendable {
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
nonisolated public struct Pipeline: Hashable, Sendable {
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
    /// (keeping `eos`: `</s>`, `[SEP]`), and the smallest signature that holds them.
    public func encode(_ text: String, tokenizer: any EdgeM3Tokenizer) throws -> Encoded {
        try encode(ids: tokenizer.encode(text, maxLength: model.longest.seqLen))
    }

    /// The same for raw UTF-16 (an NSString's code units, which may hold lone surrogates; a Swift
    /// String never does): a lone surrogate throws the Python pipeline's error.
    public func encode(utf16 units: [UInt16], tokenizer: any EdgeM3Tokenizer) throws -> Encoded {
        try encode(ids: tokenizer.encode(utf16: units, maxLength: model.longest.seqLen))
    }

    /// Steps 1-2 for each chunk of a long text (docs/index-format.md, "Passages and chunks";
    /// Python's DevicePipeline.encode_chunks): the tokenizer's `encodeChunks` for the longest
    /// signature, each chunk in the smallest signature that holds it. `overlap`: nil, the default.
    public func encodeChunks(_ text: String, tokenizer: any EdgeM3Tokenizer, overlap: Int? = nil) throws -> [Encoded] {
        try tokenizer.encodeChunks(text, maxLength: model.longest.seqLen, overlap: overlap).map { try encode(ids: $0) }
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
    public func embed(_ text: String, tokenizer: any EdgeM3Tokenizer, runner: any ModelRunner) throws -> Embedding {
        try run(encode(text, tokenizer: tokenizer), on: runner)
    }
}
