import Foundation

// The kit's tokenizers behind one protocol: one class per manifest `tokenizer.kind`
// (EdgeM3Contract.tokenizerKinds, from edge_m3/spec/names.py), chosen by `openTokenizer`, the one
// place that names them (as edge_m3.tokenizer.open_tokenizer in Python). What every kind shares is
// here too: the text's code points (a lone surrogate refused as Python refuses it), the split on
// the special-token strings, `bos ... eos` and truncation keeping `eos`.
// android_assets/src/main/java/dev/edgem3/EdgeM3Tokenizer.kt is the same for the Kotlin kit.

/// `encode(_:maxLength:)` -> the bundle's token ids, `bos ... eos`, exactly as the Python pipeline
/// gives them (tests/test_kit_tokenizer.py). Original-vocabulary ids only: a trimmed bundle's table
/// rows are `Pipeline.rows(for:)`. Immutable after init: safe to share.
nonisolated public protocol EdgeM3Tokenizer: Sendable {
    var bos: Int { get }
    var eos: Int { get }
    var pad: Int { get }

    /// Original-vocabulary ids, `bos`/`eos` added; truncation to `maxLength` keeps `eos`.
    /// `maxLength` below 2 is refused with the Python pipeline's message.
    func encode(_ text: String, maxLength: Int?) throws -> [Int]

    /// The same for raw UTF-16 (an NSString's or a JavaScript string's code units, which may hold
    /// lone surrogates; a Swift String never does): a lone surrogate is refused exactly as
    /// edge_m3.tokenizer.check_text refuses it, its index counted in code points.
    func encode(utf16 units: [UInt16], maxLength: Int?) throws -> [Int]
}

/// The tokenizer of `spec.kind` over a bundle folder's file `spec.file` (sentencepiece.bpe.model,
/// vocab.txt, bpe.json); an unknown kind is an `EdgeM3Error` naming it.
nonisolated public func openTokenizer(directory: URL, spec: TokenizerSpec) throws -> any EdgeM3Tokenizer {
    try openTokenizer(spec: spec) { name in
        let url = directory.appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw EdgeM3Error("\(url.path): not found (named by \(EdgeM3Contract.manifest))")
        }
        return [UInt8](data)
    }
}

/// The same over any storage: `read(name)` gives a bundle file's bytes.
nonisolated public func openTokenizer(spec: TokenizerSpec, read: (String) throws -> [UInt8]) throws -> any EdgeM3Tokenizer {
    switch spec.kind {
    case EdgeM3Contract.xlmrSentencepiece: return try XlmrTokenizer(model: read(spec.file), spec: spec)
    case EdgeM3Contract.wordpiece: return try WordPieceTokenizer(vocab: read(spec.file), spec: spec)
    case EdgeM3Contract.byteLevelBpe: return try BpeTokenizer(bpe: read(spec.file), spec: spec)
    default: throw unknownTokenizerKind(spec.kind)
    }
}

/// The steps every kind shares (edge_m3.tokenizer.tokenizer.Tokenizer.encode and _segments): the
/// special-token strings found in the raw text, leftmost and longest first, become their ids, the
/// text between goes to the kind's own `pieces`; `bos` and `eos` around, truncation keeps `eos`.
nonisolated struct SpecialSplit: Sendable {
    let specials: [([UInt32], Int)]
    let bos: Int
    let eos: Int

    /// `pairs`: (string, id) in the manifest's key order; the last key wins for a repeated string,
    /// longest first (a stable sort, as Python's).
    init(_ pairs: [(String, Int)], bos: Int, eos: Int) {
        var order: [String] = []
        var idOfString: [String: Int] = [:]
        for (string, id) in pairs where !string.isEmpty {
            if idOfString[string] == nil { order.append(string) }
            idOfString[string] = id
        }
        let listed = order.enumerated().map { ($0.offset, $0.element.unicodeScalars.map { $0.value }, idOfString[$0.element]!) }
        specials = listed.sorted { ($0.1.count, -$0.0) > ($1.1.count, -$1.0) }.map { ($0.1, $0.2) }
        self.bos = bos
        self.eos = eos
    }

    /// `bos`, the ids of `cps` (`pieces(cps, from, to, &out)` between the specials), `eos`; truncated.
    func encode(_ cps: [UInt32], maxLength: Int?,
                _ pieces: ([UInt32], Int, Int, inout [Int]) throws -> Void) throws -> [Int] {
        if let m = maxLength, m < 2 { throw EdgeM3Error("max_length \(m): must be an integer of at least 2") }
        var out: [Int] = [bos]
        out.reserveCapacity(cps.count + 2)
        var from = 0, i = 0
        let n = cps.count
        while i < n {
            var matched = -1
            for k in specials.indices {
                let s = specials[k].0
                if s.count <= n - i && s[0] == cps[i] {
                    var same = true
                    for j in 1..<s.count where cps[i + j] != s[j] { same = false; break }
                    if same { matched = k; break }
                }
            }
            if matched < 0 { i += 1; continue }
            if i > from { try pieces(cps, from, i, &out) }
            out.append(specials[matched].1)
            i += specials[matched].0.count
            from = i
        }
        if n > from { try pieces(cps, from, n, &out) }
        out.append(eos)
        if let m = maxLength, out.count > m {
            out.removeSubrange((m - 1)...)
            out.append(eos)
        }
        return out
    }

    /// Code points of UTF-16 units; the first lone surrogate is an error at its code-point index.
    static func checkedScalars(_ u: [UInt16]) throws -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(u.count)
        var i = 0
        while i < u.count {
            let c = u[i]
            if c >= 0xD800 && c <= 0xDBFF && i + 1 < u.count && u[i + 1] >= 0xDC00 && u[i + 1] <= 0xDFFF {
                out.append(0x10000 + ((UInt32(c) - 0xD800) << 10) + (UInt32(u[i + 1]) - 0xDC00))
                i += 2
            } else if c >= 0xD800 && c <= 0xDFFF {
                throw EdgeM3Error("text is not valid Unicode (lone surrogate at index \(out.count))")
            } else {
                out.append(UInt32(c))
                i += 1
            }
        }
        return out
    }
}

// The chunks of a long text (docs/index-format.md, "Passages and chunks"; Python's
// Tokenizer.encode_chunks): every kind adds a first and a last id, so one rule serves them all.
nonisolated extension EdgeM3Tokenizer {
    /// The text's windows for the largest signature length `maxLength` (L): `content` = the ids
    /// `encode` gives with no length limit, without their first and last id; windows of
    /// W = L - 2 content ids starting at 0, W - `overlap`, ... until one reaches the end, each
    /// as `[first id] + window + [last id]`. `overlap` defaults to W * CHUNK_OVERLAP_PERCENT / 100
    /// and must satisfy 0 <= overlap < W. A text that fits has one chunk, `encode(text, L)`.
    public func encodeChunks(_ text: String, maxLength: Int, overlap: Int? = nil) throws -> [[Int]] {
        try chunkWindows(try encode(text, maxLength: nil), maxLength: maxLength, overlap: overlap)
    }

    /// The same for raw UTF-16 code units (a lone surrogate refused as `encode(utf16:maxLength:)`).
    public func encodeChunks(utf16 units: [UInt16], maxLength: Int, overlap: Int? = nil) throws -> [[Int]] {
        try chunkWindows(try encode(utf16: units, maxLength: nil), maxLength: maxLength, overlap: overlap)
    }
}

/// `ids` (a whole text's, first and last id included) cut into the chunks of `encodeChunks`.
nonisolated func chunkWindows(_ ids: [Int], maxLength: Int, overlap: Int?) throws -> [[Int]] {
    let w = maxLength - 2
    guard w >= 1 else { throw EdgeM3Error("max_length \(maxLength): chunks need an integer of at least 3") }
    let pct = EdgeM3Contract.chunkOverlapPercent
    let o = overlap ?? w / 100 * pct + w % 100 * pct / 100  // W * pct / 100 without overflow for any W
    guard o >= 0, o < w else { throw EdgeM3Error("chunk overlap \(o): must be an integer from 0 to \(w - 1) (windows of \(w) tokens)") }
    guard ids.count >= 2 else { return [ids] }
    let first = ids[0], last = ids[ids.count - 1]
    let content = ids[1..<(ids.count - 1)]
    let n = content.count
    var chunks: [[Int]] = []
    var s = 0
    while true {
        let from = content.startIndex + s
        chunks.append([first] + content[from..<(from + min(w, n - s))] + [last])
        if s + w >= n { break }
        s += w - o
    }
    return chunks
}
