import Foundation

// The BERT family's tokenizer (manifest kind `wordpiece`) in plain Swift (Foundation only). Its ids
// equal edge_m3.tokenizer.wordpiece.WordPieceTokenizer's, which equal the reference's (`tokenizers`
// on the checkpoint's tokenizer.json), on every text; tests/test_kit_tokenizer.py checks that on the
// corpora, random text and every code point. The same algorithm as
// android_assets/src/main/java/dev/edgem3/WordPieceTokenizer.kt (change both together):
//   1. special-token strings in the raw text -> their ids, leftmost-longest (SpecialSplit);
//   2. BertNormalizer per the manifest's options: clean_text, handle_chinese_chars, strip_accents
//      (NFD, canonical order, nonspacing marks dropped), lowercase;
//   3. BertPreTokenizer: words between whitespace, each punctuation character a word;
//   4. WordPiece per word: greedy longest match first, later pieces with the continuing prefix; a
//      word too long or not covered is one unk;
// every per-code-point decision from WordPieceTables.swift, generated from the same probe of the
// reference as Python's tables (tools/codegen/gen_wordpiece_tables.py), never from the OS's Unicode
// data. Everything counts code points, and tokens are compared as code points, never as Swift
// Strings (whose equality is canonical equivalence: "é" == "e\u{301}"). Immutable after init.

/// `encode(_:maxLength:)` -> `[CLS] pieces [SEP]` ids over the bundle's vocab.txt (one token a
/// line, id = line number), exactly as the Python pipeline gives them.
nonisolated public final class WordPieceTokenizer: EdgeM3Tokenizer {
    public let bos: Int
    public let eos: Int
    public let pad: Int
    private let unk: Int
    private let options: WordPieceOptions
    /// Tokens (as code points) -> ids; `continuation`: tokens that start with the prefix, by the rest.
    private let ids: [[UInt32]: Int]
    private let continuation: [[UInt32]: Int]
    private let longest: Int
    private let longestContinuation: Int
    private let split: SpecialSplit

    /// - Parameters:
    ///   - vocab: the bytes of vocab.txt (`spec.file` names it in messages).
    ///   - spec: the manifest's `tokenizer` entry, kind `wordpiece` (with its `options`).
    public init(vocab: [UInt8], spec: TokenizerSpec) throws {
        let file = spec.file
        let manifest = EdgeM3Contract.manifest
        if spec.kind != EdgeM3Contract.wordpiece {
            throw EdgeM3Error("\(manifest): tokenizer kind '\(spec.kind)' is not '\(EdgeM3Contract.wordpiece)'")
        }
        guard let options = spec.options else {
            throw EdgeM3Error("\(manifest): tokenizer options missing (required for kind \(spec.kind))")
        }
        if spec.vocabMapFile != nil {
            throw EdgeM3Error("\(manifest): tokenizer vocab_map must be null for a WordPiece vocabulary")
        }
        let tokens = try Self.readVocab(vocab, file: file)
        var table: [[UInt32]: Int] = [:]
        table.reserveCapacity(tokens.count)
        for (i, tok) in tokens.enumerated() {
            if let seen = table.updateValue(i, forKey: tok) {
                throw EdgeM3Error("\(file): vocabulary line \(i + 1) \(Self.shown(tok)) repeats line \(seen + 1)")
            }
        }
        if tokens.count != spec.vocabSize || spec.idOffset != 0 {
            throw EdgeM3Error("\(file): \(tokens.count) tokens, but the manifest says vocab_size \(spec.vocabSize) " +
                              "and id_offset \(spec.idOffset) (want 0)")
        }
        var pairs: [(String, Int)] = []
        for key in EdgeM3Contract.specialKeys {
            let string = spec.specialTokens[key]!  // the decoder requires every key
            let id = spec.special[key]!
            if table[string.unicodeScalars.map { $0.value }] != id {
                throw EdgeM3Error("\(file): special token \(key) '\(string)' is not line \(id + 1)")
            }
            pairs.append((string, id))
        }
        let prefix = options.continuingSubwordPrefix.unicodeScalars.map { $0.value }
        var rest: [[UInt32]: Int] = [:]
        var top = 0, topContinuation = 0
        for (i, tok) in tokens.enumerated() {
            top = max(top, tok.count)
            if tok.starts(with: prefix) {
                rest[Array(tok[prefix.count...])] = i
                topContinuation = max(topContinuation, tok.count - prefix.count)
            }
        }
        ids = table
        continuation = rest
        longest = top
        longestContinuation = topContinuation
        self.options = options
        bos = spec.special.bos
        eos = spec.special.eos
        pad = spec.special.pad
        unk = spec.special.unk
        split = SpecialSplit(pairs, bos: bos, eos: eos)
    }

    /// `[CLS] ... [SEP]`: EdgeM3Tokenizer.encode.
    public func encode(_ text: String, maxLength: Int? = nil) throws -> [Int] {
        try split.encode(text.unicodeScalars.map { $0.value }, maxLength: maxLength) { pieces($0, $1, $2, &$3) }
    }

    /// EdgeM3Tokenizer.encode(utf16:maxLength:).
    public func encode(utf16 units: [UInt16], maxLength: Int? = nil) throws -> [Int] {
        try split.encode(SpecialSplit.checkedScalars(units), maxLength: maxLength) { pieces($0, $1, $2, &$3) }
    }

    /// The words of `cps[from ..< to]` as WordPiece sees them (normalized, pre-tokenized), as ids.
    private func pieces(_ cps: [UInt32], _ from: Int, _ to: Int, _ out: inout [Int]) {
        let norm = normalize(cps, from, to)
        let d = WordPieceData.shared
        var i = 0
        let n = norm.count
        while i < n {
            let c = norm[i]
            if d.punct.contains(c) {
                word(norm, i, i + 1, &out)
                i += 1
            } else if d.split.contains(c) {
                i += 1
            } else {
                var j = i + 1
                while j < n && !d.punct.contains(norm[j]) && !d.split.contains(norm[j]) { j += 1 }
                word(norm, i, j, &out)
                i = j
            }
        }
    }

    /// Greedy longest-match-first over `w[s ..< e]`; one unk for a long or uncoverable word.
    private func word(_ w: [UInt32], _ s: Int, _ e: Int, _ out: inout [Int]) {
        if e - s > options.maxInputCharsPerWord {
            out.append(unk)
            return
        }
        let mark = out.count
        var start = s
        while start < e {
            var end = min(e, start + (start > s ? longestContinuation : longest))
            var found: Int? = nil
            while end > start {
                let piece = Array(w[start..<end])
                found = start > s ? continuation[piece] : ids[piece]
                if found != nil { break }
                end -= 1
            }
            guard let id = found else {
                out.removeSubrange(mark...)
                out.append(unk)
                return
            }
            out.append(id)
            start = end
        }
    }

    /// BertNormalizer with the manifest's options (edge_m3.tokenizer.wordpiece.normalize).
    private func normalize(_ cps: [UInt32], _ from: Int, _ to: Int) -> [UInt32] {
        let d = WordPieceData.shared
        let space: UInt32 = 0x20
        var out: [UInt32] = []
        out.reserveCapacity(to - from + 8)
        for i in from..<to {
            var c = cps[i]
            if options.cleanText {
                if d.cleanDrop.contains(c) { continue }
                if d.cleanSpace.contains(c) { c = space }
            }
            if options.handleChineseChars && d.chinese.contains(c) {
                out += [space, c, space]
            } else {
                out.append(c)
            }
        }
        if options.stripAccents { out = stripAccents(out) }
        if options.lowercase {
            var lower: [UInt32] = []
            lower.reserveCapacity(out.count + 8)
            for c in out {
                if let m = d.lower[c] { lower += m } else { lower.append(c) }
            }
            out = lower
        }
        return out
    }

    /// NFD, then each run of non-starters sorted by combining class (stably), then nonspacing marks dropped.
    private func stripAccents(_ text: [UInt32]) -> [UInt32] {
        let d = WordPieceData.shared
        typealias T = WordPieceTables
        var nfd: [UInt32] = []
        nfd.reserveCapacity(text.count + 8)
        for c in text {
            if c >= T.sbase && c < T.sbase + T.lcount * T.vcount * T.tcount {
                let si = c - T.sbase
                let t = si % T.tcount
                nfd.append(T.lbase + si / (T.vcount * T.tcount))
                nfd.append(T.vbase + si % (T.vcount * T.tcount) / T.tcount)
                if t != 0 { nfd.append(T.tbase + t) }
            } else if let m = d.decompose[c] {
                nfd += m
            } else {
                nfd.append(c)
            }
        }
        var i = 0
        while i < nfd.count {
            guard d.combining[nfd[i]] != nil else { i += 1; continue }
            var j = i + 1
            while j < nfd.count && d.combining[nfd[j]] != nil { j += 1 }
            if j - i > 1 {
                // A stable sort: by class, then by position.
                let run = nfd[i..<j].enumerated().sorted { (d.combining[$0.element]!, $0.offset) < (d.combining[$1.element]!, $1.offset) }
                for (k, x) in run.enumerated() { nfd[i + k] = x.element }
            }
            i = j
        }
        return nfd.filter { !d.nonspacing.contains($0) }
    }

    /// vocab.txt's tokens as code points: strict UTF-8, one a line (id = line number), none empty or
    /// holding a line break (as Python's str.splitlines sees one), the last line's "\n" optional.
    static func readVocab(_ bytes: [UInt8], file: String) throws -> [[UInt32]] {
        var scalars: [UInt32] = []
        scalars.reserveCapacity(bytes.count)
        var it = bytes.makeIterator()
        var utf8 = UTF8()
        decoding: while true {
            switch utf8.decode(&it) {
            case .scalarValue(let v): scalars.append(v.value)
            case .emptyInput: break decoding
            case .error: throw EdgeM3Error("\(file): not UTF-8")
            }
        }
        var lines = scalars.split(separator: 0x0A, omittingEmptySubsequences: false).map { Array($0) }
        if lines.last?.isEmpty == true { lines.removeLast() }
        let breaks: Set<UInt32> = [0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029]
        for (i, tok) in lines.enumerated() where tok.isEmpty || tok.contains(where: breaks.contains) {
            throw EdgeM3Error("\(file): vocabulary line \(i + 1) \(shown(tok)) is empty or holds a line break")
        }
        if lines.isEmpty { throw EdgeM3Error("\(file): empty vocabulary") }
        return lines
    }

    /// A token in a one-line message: quoted, control characters and line breaks escaped.
    private static func shown(_ cps: [UInt32]) -> String {
        var s = "'"
        for c in cps {
            switch c {
            case 0x09: s += "\\t"
            case 0x0A: s += "\\n"
            case 0x0D: s += "\\r"
            case 0..<0x20, 0x7F...0x9F: s += "\\x" + (c < 16 ? "0" : "") + String(c, radix: 16)
            case 0x2028, 0x2029: s += "\\u" + String(c, radix: 16)
            default: s.unicodeScalars.append(Unicode.Scalar(c)!)
            }
        }
        return s + "'"
    }
}

/// WordPieceTables decoded once: sets of code points, and maps (edge_m3.tokenizer.wordpiece._tables);
/// BpeTokenizer's NFC takes its decompositions and combining classes.
nonisolated struct WordPieceData: Sendable {
    static let shared = WordPieceData()

    let cleanDrop = CodePointSet(WordPieceTables.cleanDrop)
    let cleanSpace = CodePointSet(WordPieceTables.cleanSpace)
    let split = CodePointSet(WordPieceTables.split)
    let punct = CodePointSet(WordPieceTables.punct)
    let chinese = CodePointSet(WordPieceTables.chinese)
    let nonspacing = CodePointSet(WordPieceTables.nonspacing)
    let decompose = WordPieceData.map(WordPieceTables.decompositions)
    let lower = WordPieceData.map(WordPieceTables.lowercase)
    let combining: [UInt32: Int] = {
        var out: [UInt32: Int] = [:]
        for item in WordPieceData.items(WordPieceTables.combining) {
            let parts = item.split(separator: ":")
            let (lo, hi) = WordPieceData.span(parts[0])
            for cp in lo...hi { out[cp] = Int(parts[1])! }
        }
        return out
    }()

    static func items(_ table: String) -> [Substring] { table.split(separator: ",") }

    /// "a-b" or "a" (hex) -> (a, b).
    static func span(_ item: Substring) -> (UInt32, UInt32) {
        let parts = item.split(separator: "-")
        return (UInt32(parts[0], radix: 16)!, UInt32(parts[parts.count - 1], radix: 16)!)
    }

    /// "cp:hex hex,..." -> code point -> code points.
    static func map(_ table: String) -> [UInt32: [UInt32]] {
        var out: [UInt32: [UInt32]] = [:]
        for item in items(table) {
            let parts = item.split(separator: ":")
            out[UInt32(parts[0], radix: 16)!] = parts[1].split(separator: " ").map { UInt32($0, radix: 16)! }
        }
        return out
    }
}

/// "a-b,c" (hex) as a bit set over every code point.
nonisolated struct CodePointSet: Sendable {
    private var words = [UInt64](repeating: 0, count: 0x110000 / 64)

    init(_ table: String) {
        for item in WordPieceData.items(table) {
            let (lo, hi) = WordPieceData.span(item)
            for cp in lo...hi { words[Int(cp >> 6)] |= 1 << UInt64(cp & 63) }
        }
    }

    @inline(__always)
    func contains(_ cp: UInt32) -> Bool {
        Int(cp >> 6) < words.count && words[Int(cp >> 6)] & (1 << UInt64(cp & 63)) != 0
    }
}
