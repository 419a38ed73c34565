import Foundation

// What the manifest types do beyond holding fields: the generated Manifest.swift (from
// edge_m3/spec/ by tools/codegen/gen_kit_contract.py) calls the checks below by name.
// Also vocab_map.json (VocabMap) and the JSON decoding with errors that name the field.
// android_assets/.../ManifestRules.kt is the same for the Kotlin kit.

/// Every error the kit throws: `kind` to branch on (EdgeM3ErrorKind, generated from
/// edge_m3/spec/names.py), `message` one line naming the file, field, signature or call; for a text
/// the kit refuses it is the Python pipeline's (e.g. a lone surrogate).
nonisolated public struct EdgeM3Error: Error, CustomStringConvertible, Equatable, Sendable {
    public let kind: EdgeM3ErrorKind
    public let message: String
    /// `message`'s line breaks are escaped (EdgeM3Contract.escapeLineBreaks, generated from
    /// spec.LINE_BREAKS: what Python's str.splitlines splits on), so a refusal is one line
    /// whatever string from a file it holds.
    public init(_ message: String, kind: EdgeM3ErrorKind = .invalidInput) {
        self.kind = kind
        self.message = EdgeM3Contract.escapeLineBreaks(message)
    }
    public var description: String { message }
}

nonisolated extension SpecialIds {
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

nonisolated extension TokenizerSpec {
    /// XLM-R's special-token strings: `<s>`, `<pad>`, `</s>`, `<unk>`, `<mask>`.
    public static let xlmrSpecialTokens = Dictionary(uniqueKeysWithValues: TokenizerTables.defaultSpecialTokens)
}

/// `special_tokens`: absent or null gives XLM-R's strings; present, every key is required (as
/// edge_m3/spec/manifest.py).
nonisolated func checkedSpecialTokens(_ tokens: [String: String]?, at path: [CodingKey]) throws -> [String: String] {
    let tokens = tokens ?? TokenizerSpec.xlmrSpecialTokens
    for key in EdgeM3Contract.specialKeys where tokens[key] == nil {
        throw DecodingError.keyNotFound(AnyKey(stringValue: key), DecodingError.Context(
            codingPath: path, debugDescription: "missing \(key)"))
    }
    return tokens
}

nonisolated private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

nonisolated extension Signature {
    public func output(named name: String) -> TensorSpec? { outputs.first { $0.name == name } }
}

/// A model's signatures: at least one, each with room for <s> and </s>, sorted by length.
nonisolated func checkedSignatures(_ signatures: [Signature], file: String) throws -> [Signature] {
    if signatures.isEmpty { throw EdgeM3Error("manifest.json: \(file) has no signatures") }
    if let s = signatures.first(where: { $0.seqLen < 2 }) {
        throw EdgeM3Error("manifest.json: \(file) signature \(s.name): seq_len \(s.seqLen) < 2 (no room for <s> and </s>)")
    }
    return signatures.sorted { $0.seqLen < $1.seqLen }
}

nonisolated extension ModelEntry {
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

/// A file name from manifest.json (tokenizer.file, tokenizer.vocab_map.file, models[].file): a
/// name in the bundle's folder, never a path, no line break (edge_m3/spec/manifest.py is_file_name:
/// "../x" or "/x" opened a file outside the bundle).
nonisolated func checkedFileName(_ name: String) throws -> String {
    if EdgeM3Contract.notFileNames.contains(name) || EdgeM3Contract.fileNameSeparators.contains(where: { name.contains($0) })
        || name.unicodeScalars.contains(where: { EdgeM3Contract.lineBreakEscapes[$0] != nil }) {
        throw EdgeM3Error("manifest.json: '\(escapedControls(name))' is not a file name in the bundle (a name, not a path)")
    }
    return name
}

nonisolated func checkedFileName(_ name: String?) throws -> String? { try name.map(checkedFileName) }

/// `files`: every key a file name (checkedFileName).
nonisolated func checkedFileNames(_ files: [String: FileEntry]) throws -> [String: FileEntry] {
    for name in files.keys { _ = try checkedFileName(name) }
    return files
}

/// `tokenizer.kind`: one of EdgeM3Contract.tokenizerKinds.
nonisolated func checkedTokenizerKind(_ kind: String) throws -> String {
    if !EdgeM3Contract.tokenizerKinds.contains(kind) { throw unknownTokenizerKind(kind) }
    return kind
}

/// `s` with its control and line-separator characters as `\u{..}` escapes: a message naming a
/// string from a file stays one line (issue 38); other strings are unchanged.
nonisolated func escapedControls(_ s: String) -> String {
    var out = ""
    for u in s.unicodeScalars {
        if u.properties.generalCategory == .control || u == "\u{2028}" || u == "\u{2029}" {
            out += "\\u{\(String(u.value, radix: 16))}"
        } else {
            out.unicodeScalars.append(u)
        }
    }
    return out
}

/// A kind this kit has no tokenizer for (a newer bundle, or a typo), named with the ones it has.
nonisolated func unknownTokenizerKind(_ kind: String) -> EdgeM3Error {
    EdgeM3Error("\(EdgeM3Contract.manifest): tokenizer.kind '\(escapedControls(kind))' unknown (known: \(EdgeM3Contract.tokenizerKinds.joined(separator: ", ")))")
}

/// `schema_version` must be the one this kit was generated for.
nonisolated func checkedSchemaVersion(_ version: Int) throws -> Int {
    if version != EdgeM3Contract.schemaVersion {
        throw EdgeM3Error("manifest.json: schema_version \(version), this kit reads \(EdgeM3Contract.schemaVersion)")
    }
    return version
}

nonisolated extension Manifest {
    /// Reads and checks manifest.json; errors name the field.
    public init(contentsOf url: URL) throws {
        self = try decodeJSON(Manifest.self, from: readBundleFile(url), file: EdgeM3Contract.manifest)
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
nonisolated public struct VocabMap: Codable, Hashable, Sendable {
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
        let decoded = try decodeJSON(VocabMap.self, from: readBundleFile(url), file: file)
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

/// A bundle file's bytes; a missing or unreadable file is an EdgeM3Error (corrupt_bundle) naming
/// it, never Foundation's error (issue 38: a bundle folder without its vocab_map.json). On Linux,
/// swift-foundation keeps 4 KB for each empty file read so (docs/benchmarks.md, "The kits").
nonisolated func readBundleFile(_ url: URL) throws -> Data {
    guard let data = FileManager.default.contents(atPath: url.path) else {
        throw EdgeM3Error("\(url.path): not found or unreadable", kind: .corruptBundle)
    }
    return data
}

/// JSONDecoder with errors that name the file and the field path instead of Foundation's dumps.
nonisolated func decodeJSON<T: Decodable>(_ type: T.Type, from data: Data, file: String) throws -> T {
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
