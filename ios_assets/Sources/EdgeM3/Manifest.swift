import Foundation

// manifest.json and vocab_map.json as Codable values (docs/bundle-format.md).
// Reference: edge_m3/contract.py (Manifest, TokenizerSpec), edge_m3/tokenizer/vocab.py (row_map).

/// A bundle or input that breaks the contract; the message names the file or field, and for a
/// text the kit refuses it is the Python pipeline's (e.g. a lone surrogate).
public struct EdgeM3Error: Error, CustomStringConvertible, Equatable, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The five special tokens' ids: all required (EdgeM3Contract.specialKeys).
public struct SpecialIds: Codable, Hashable, Sendable {
    public var bos: Int, pad: Int, eos: Int, unk: Int, mask: Int

    public init(bos: Int, pad: Int, eos: Int, unk: Int, mask: Int) {
        (self.bos, self.pad, self.eos, self.unk, self.mask) = (bos, pad, eos, unk, mask)
    }

    /// The id of a special token by its manifest key (`bos`, `pad`, `eos`, `unk`, `mask`).
    public subscript(key: String) -> Int? {
        switch key {
        case "bos": return bos
        case "pad": return pad
        case "eos": return eos
        case "unk": return unk
        case "mask": return mask
        default: return nil
        }
    }

    /// Every special id: what a trimmed vocabulary must keep.
    public var all: [Int] { EdgeM3Contract.specialKeys.compactMap { self[$0] } }

    /// What lexical weights leave out: FlagEmbedding drops <s>, </s>, <pad>, <unk>, keeps <mask>.
    public var skippedInLexicalWeights: Set<Int> { Set(EdgeM3Contract.lexicalSkipKeys.compactMap { self[$0] }) }
}

/// The manifest's `tokenizer` entry: what XlmrTokenizer needs besides sentencepiece.bpe.model.
public struct TokenizerSpec: Codable, Hashable, Sendable {
    public var file: String
    public var special: SpecialIds
    /// The strings the reference turns into special ids wherever the text holds them, by key
    /// (`bos` ... `mask`); a manifest without `special_tokens` gets XLM-R's (as edge_m3/contract.py).
    public var specialTokens: [String: String]
    public var spUnkId: Int
    public var idOffset: Int
    public var vocabSize: Int
    /// `vocab_map.file`: the trimmed vocabulary's row map, nil for the full vocabulary.
    public var vocabMapFile: String?

    public init(file: String, special: SpecialIds, specialTokens: [String: String] = TokenizerSpec.xlmrSpecialTokens,
                spUnkId: Int, idOffset: Int, vocabSize: Int, vocabMapFile: String? = nil) {
        self.file = file
        self.special = special
        self.specialTokens = specialTokens
        self.spUnkId = spUnkId
        self.idOffset = idOffset
        self.vocabSize = vocabSize
        self.vocabMapFile = vocabMapFile
    }

    /// XLM-R's special-token strings: `<s>`, `<pad>`, `</s>`, `<unk>`, `<mask>`.
    public static let xlmrSpecialTokens = Dictionary(uniqueKeysWithValues: TokenizerTables.defaultSpecialTokens)

    enum CodingKeys: String, CodingKey {
        case file, special = "special_ids", specialTokens = "special_tokens", spUnkId = "sp_unk_id",
             idOffset = "id_offset", vocabSize = "vocab_size", vocabMap = "vocab_map"
    }

    private struct VocabMapEntry: Codable { var file: String }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        file = try c.decode(String.self, forKey: .file)
        special = try c.decode(SpecialIds.self, forKey: .special)
        // Absent or null: XLM-R's strings; present: every key required, as edge_m3/contract.py.
        let tokens = try c.decodeIfPresent([String: String].self, forKey: .specialTokens) ?? TokenizerSpec.xlmrSpecialTokens
        for key in EdgeM3Contract.specialKeys where tokens[key] == nil {
            throw DecodingError.keyNotFound(SpecialKey(stringValue: key), DecodingError.Context(
                codingPath: c.codingPath + [CodingKeys.specialTokens], debugDescription: "missing \(key)"))
        }
        specialTokens = tokens
        spUnkId = try c.decode(Int.self, forKey: .spUnkId)
        idOffset = try c.decode(Int.self, forKey: .idOffset)
        vocabSize = try c.decode(Int.self, forKey: .vocabSize)
        vocabMapFile = try c.decodeIfPresent(VocabMapEntry.self, forKey: .vocabMap)?.file
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(file, forKey: .file)
        try c.encode(special, forKey: .special)
        try c.encode(specialTokens, forKey: .specialTokens)
        try c.encode(spUnkId, forKey: .spUnkId)
        try c.encode(idOffset, forKey: .idOffset)
        try c.encode(vocabSize, forKey: .vocabSize)
        try c.encode(vocabMapFile.map { VocabMapEntry(file: $0) }, forKey: .vocabMap)  // null when full
    }

    private struct SpecialKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

public struct TensorSpec: Codable, Hashable, Sendable {
    public var name: String
    public var shape: [Int]
    public var dtype: String

    public init(name: String, shape: [Int], dtype: String) {
        self.name = name
        self.shape = shape
        self.dtype = dtype
    }
}

/// One fixed-length entry point of the model (`embed_<L>`).
public struct Signature: Codable, Hashable, Sendable {
    public var name: String
    public var seqLen: Int
    public var inputs: [TensorSpec]
    public var outputs: [TensorSpec]

    public init(name: String, seqLen: Int, inputs: [TensorSpec] = [], outputs: [TensorSpec] = []) {
        self.name = name
        self.seqLen = seqLen
        self.inputs = inputs
        self.outputs = outputs
    }

    enum CodingKeys: String, CodingKey { case name, seqLen = "seq_len", inputs, outputs }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        seqLen = try c.decode(Int.self, forKey: .seqLen)
        inputs = try c.decodeIfPresent([TensorSpec].self, forKey: .inputs) ?? []
        outputs = try c.decodeIfPresent([TensorSpec].self, forKey: .outputs) ?? []
    }

    public func output(named name: String) -> TensorSpec? { outputs.first { $0.name == name } }
}

/// One model file of the bundle; its signatures sorted by length, never empty.
public struct ModelEntry: Codable, Hashable, Sendable {
    public let format: String
    public let file: String
    public let quant: String
    public let signatures: [Signature]

    public init(format: String, file: String, quant: String, signatures: [Signature]) throws {
        if signatures.isEmpty { throw EdgeM3Error("manifest.json: \(file) has no signatures") }
        if let s = signatures.first(where: { $0.seqLen < 2 }) {
            throw EdgeM3Error("manifest.json: \(file) signature \(s.name): seq_len \(s.seqLen) < 2 (no room for <s> and </s>)")
        }
        self.format = format
        self.file = file
        self.quant = quant
        self.signatures = signatures.sorted { $0.seqLen < $1.seqLen }
    }

    enum CodingKeys: String, CodingKey { case format, file, quant, signatures }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(format: c.decode(String.self, forKey: .format),
                      file: c.decode(String.self, forKey: .file),
                      quant: c.decodeIfPresent(String.self, forKey: .quant) ?? "",
                      signatures: c.decode([Signature].self, forKey: .signatures))
    }

    public func signature(named name: String) throws -> Signature {
        guard let s = signatures.first(where: { $0.name == name }) else {
            throw EdgeM3Error("manifest.json: \(file) has no signature \(name)")
        }
        return s
    }

    /// Step 2: the smallest signature that holds `tokenCount` ids, else the largest.
    public func signature(fitting tokenCount: Int) -> Signature {
        signatures.first { $0.seqLen >= tokenCount } ?? signatures[signatures.count - 1]
    }

    public var longest: Signature { signatures[signatures.count - 1] }
}

public struct FileEntry: Codable, Hashable, Sendable {
    public var sha256: String
    public var size: Int64

    public init(sha256: String, size: Int64) {
        self.sha256 = sha256
        self.size = size
    }
}

/// manifest.json: the fields the kit reads (others, e.g. `source` or `ops`, are ignored).
public struct Manifest: Codable, Hashable, Sendable {
    public let schemaVersion: Int
    public let quant: String
    public let hiddenSize: Int
    public let maxLength: Int
    public let heads: [String]
    public let tokenizer: TokenizerSpec
    public let models: [ModelEntry]
    public let files: [String: FileEntry]

    enum CodingKeys: String, CodingKey {
        case schemaVersion = "schema_version", quant, hiddenSize = "hidden_size", maxLength = "max_length",
             heads, tokenizer, models, files
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        schemaVersion = try c.decode(Int.self, forKey: .schemaVersion)
        if schemaVersion != EdgeM3Contract.schemaVersion {
            throw EdgeM3Error("manifest.json: schema_version \(schemaVersion), this kit reads \(EdgeM3Contract.schemaVersion)")
        }
        quant = try c.decode(String.self, forKey: .quant)
        hiddenSize = try c.decode(Int.self, forKey: .hiddenSize)
        maxLength = try c.decode(Int.self, forKey: .maxLength)
        heads = try c.decode([String].self, forKey: .heads)
        tokenizer = try c.decode(TokenizerSpec.self, forKey: .tokenizer)
        models = try c.decode([ModelEntry].self, forKey: .models)
        files = try c.decodeIfPresent([String: FileEntry].self, forKey: .files) ?? [:]
    }

    /// Reads and checks manifest.json; errors name the field.
    public init(contentsOf url: URL) throws {
        self = try decodeJSON(Manifest.self, from: Data(contentsOf: url), file: EdgeM3Contract.manifest)
    }

    /// The model entry of `format` ("tflite" for the mobile kits).
    public func model(format: String) throws -> ModelEntry {
        guard let m = models.first(where: { $0.format == format }) else {
            throw EdgeM3Error("manifest.json: no \(format) model (has \(models.map(\.format)))")
        }
        return m
    }
}

/// Original id -> row of a trimmed embedding table (vocab_map.json `kept_ids`, sorted and unique).
public struct VocabMap: Codable, Hashable, Sendable {
    public let keptIds: [Int]

    enum CodingKeys: String, CodingKey { case keptIds = "kept_ids" }

    /// `keptIds` must be sorted, unique, inside the vocabulary and hold every special id.
    public init(keptIds: [Int], tokenizer: TokenizerSpec) throws {
        let file = tokenizer.vocabMapFile ?? EdgeM3Contract.vocabMap
        for i in keptIds.indices
        where keptIds[i] < 0 || keptIds[i] >= tokenizer.vocabSize || (i > 0 && keptIds[i] <= keptIds[i - 1]) {
            throw EdgeM3Error("\(file): kept ids must be sorted, unique and < \(tokenizer.vocabSize)")
        }
        self.keptIds = keptIds
        let missing = tokenizer.special.all.filter { index(of: $0) == nil }
        if !missing.isEmpty { throw EdgeM3Error("\(file): kept ids lack the special ids \(missing)") }
    }

    /// Reads vocab_map.json and checks it against the manifest's tokenizer.
    public init(contentsOf url: URL, tokenizer: TokenizerSpec) throws {
        let file = tokenizer.vocabMapFile ?? url.lastPathComponent
        let decoded = try decodeJSON(VocabMap.self, from: Data(contentsOf: url), file: file)
        try self.init(keptIds: decoded.keptIds, tokenizer: tokenizer)
    }

    /// The row of `id` in the trimmed table (binary search), nil when the id was dropped.
    public func index(of id: Int) -> Int? {
        var lo = 0
        var hi = keptIds.count - 1
        while lo <= hi {
            let mid = (lo + hi) >> 1
            if keptIds[mid] < id { lo = mid + 1 } else if keptIds[mid] > id { hi = mid - 1 } else { return mid }
        }
        return nil
    }
}

/// JSONDecoder with errors that name the file and the field path instead of Foundation's dumps.
func decodeJSON<T: Decodable>(_ type: T.Type, from data: Data, file: String) throws -> T {
    do {
        return try JSONDecoder().decode(type, from: data)
    } catch let error as DecodingError {
        func path(_ keys: [CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        }
        switch error {
        case let .keyNotFound(key, ctx):
            throw EdgeM3Error("\(file): missing \"\(key.stringValue)\" in \(path(ctx.codingPath).isEmpty ? "the top level" : path(ctx.codingPath))")
        case let .typeMismatch(_, ctx), let .valueNotFound(_, ctx), let .dataCorrupted(ctx):
            throw EdgeM3Error("\(file): \(path(ctx.codingPath)): \(ctx.debugDescription)")
        @unknown default:
            throw EdgeM3Error("\(file): \(error)")
        }
    }
}
