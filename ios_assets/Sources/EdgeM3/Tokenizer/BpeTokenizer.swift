import Foundation

// The ModernBERT family's tokenizer (manifest kind `byte-level-bpe`: GPT-2 / GPT-NeoX / OLMo style)
// in plain Swift (Foundation only). Its ids equal edge_m3.tokenizer.bpe.ByteLevelBPETokenizer's,
// which equal the reference's (`tokenizers` on the checkpoint's tokenizer.json), on every text;
// tests/test_kit_tokenizer.py checks that on the corpora, random text and every code point. The
// same algorithm as android_assets/src/main/java/dev/edgem3/BpeTokenizer.kt (change both together):
//   1. added tokens with normalized=false found in the raw text, leftmost-longest, anywhere; an
//      lstrip one takes the whitespace before it (back to the previous match), an rstrip one the
//      whitespace after it; each is its id;
//   2. each text between them normalized (none, or NFC) and the normalized=true tokens found in it
//      the same way;
//   3. ByteLevel: a space in front unless the text starts with one (add_prefix_space), the GPT-2
//      pattern (use_regex), each piece's UTF-8 bytes as GPT-2's byte characters;
//   4. BPE per piece: the whole piece if it is a token (ignore_merges), else one symbol per byte
//      (unk for a byte outside the vocabulary, fused or dropped), merged by rank, lowest first,
//      leftmost on ties, as tokenizers' heap does;
//   5. `[CLS] ... [SEP]`, truncation keeping `[SEP]`.
// \p{L}, \p{N}, \s and NFC's compositions come from BpeTables.swift, NFC's decompositions and
// combining classes from WordPieceTables.swift: both generated from the same probe of the reference
// as Python's tables (tools/codegen/gen_bpe_tables.py, gen_wordpiece_tables.py), never from the
// OS's Unicode data. Everything counts code points, and tokens are compared as code points, never
// as Swift Strings (whose equality is canonical equivalence). Immutable after init.

/// `encode(_:maxLength:)` -> `[CLS] pieces [SEP]` ids over the bundle's bpe.json (the vocabulary,
/// the merges and the added tokens), exactly as the Python pipeline gives them.
nonisolated public final class BpeTokenizer: EdgeM3Tokenizer {
    public let bos: Int
    public let eos: Int
    public let pad: Int
    private let options: BpeOptions
    /// Tokens (as code points) -> ids.
    private let ids: [[UInt32]: Int]
    /// (left id << 32 | right id) -> rank of the merge; `merged[rank]`: the id it makes.
    private let ranks: [Int: Int]
    private let merged: [Int]
    /// Byte -> id of its GPT-2 character, -1 when the vocabulary lacks it.
    private let byteIds: [Int]
    private let unkId: Int
    private let raw: BpeAddedTokens
    private let normalized: BpeAddedTokens

    /// - Parameters:
    ///   - bpe: the bytes of bpe.json (`spec.file` names it in messages).
    ///   - spec: the manifest's `tokenizer` entry, kind `byte-level-bpe` (with its options).
    public init(bpe: [UInt8], spec: TokenizerSpec) throws {
        let file = spec.file
        let manifest = EdgeM3Contract.manifest
        if spec.kind != EdgeM3Contract.byteLevelBpe {
            throw EdgeM3Error("\(manifest): tokenizer kind '\(spec.kind)' is not '\(EdgeM3Contract.byteLevelBpe)'")
        }
        guard let options = spec.bpeOptions else {
            throw EdgeM3Error("\(manifest): tokenizer options missing (required for kind \(spec.kind))")
        }
        if !EdgeM3Contract.bpeNormalizers.contains(options.normalizer) {
            let known = EdgeM3Contract.bpeNormalizers.map { "'\($0)'" }.joined(separator: ", ")
            throw EdgeM3Error("\(manifest): tokenizer options.normalizer '\(options.normalizer)' unknown (known: \(known))")
        }
        if spec.vocabMapFile != nil || spec.idOffset != 0 {
            throw EdgeM3Error("\(manifest): tokenizer vocab_map must be null and id_offset 0 for a byte-level BPE tokenizer")
        }
        let data = try Self.readBpe(bpe, file: file)
        let tokens = data.vocab
        let n = tokens.count
        var table: [[UInt32]: Int] = [:]
        table.reserveCapacity(n)
        for (i, t) in tokens.enumerated() { table[t] = i }
        var ranks: [Int: Int] = [:]
        ranks.reserveCapacity(data.merges.count)
        var merged = [Int](repeating: 0, count: data.merges.count)
        for (rank, pair) in data.merges.enumerated() {
            guard let a = table[pair.0], let b = table[pair.1], let ab = table[pair.0 + pair.1] else {
                throw EdgeM3Error("\(file): merge [\(Self.quoted(pair.0)), \(Self.quoted(pair.1))] is not of vocabulary tokens")
            }
            ranks[Self.key(a, b)] = rank  // a repeated pair keeps its last rank, as the reference's map does
            merged[rank] = ab
        }
        let unk = options.unkToken.unicodeScalars.map { $0.value }
        if unk.isEmpty {
            unkId = -1
        } else if let id = table[unk] {
            unkId = id
        } else {
            throw EdgeM3Error("\(file): options.unk_token \(Self.quoted(unk)) is not in the vocabulary")
        }
        var added: [Int: [UInt32]] = [:]
        var rawTokens: [BpeAddedTokens.Token] = [], normalizedTokens: [BpeAddedTokens.Token] = []
        var rawAt: [[UInt32]: Int] = [:], normalizedAt: [[UInt32]: Int] = [:]  // content -> index (the last entry wins)
        for entry in data.added {
            let tid = entry.id
            if added[tid] != nil || tid < 0 || tid >= spec.vocabSize || (tid < n && tokens[tid] != entry.content) {
                throw EdgeM3Error("\(file): added token \(Self.quoted(entry.content)) id \(tid) repeats, lies outside the " +
                                  "vocab_size \(spec.vocabSize) or is another token's")
            }
            added[tid] = entry.content
            if entry.normalized {
                let norm = options.normalizer == "NFC" ? Self.normalize(entry.content) : entry.content
                let token = BpeAddedTokens.Token(cps: norm, id: tid, lstrip: entry.lstrip, rstrip: entry.rstrip)
                if let at = normalizedAt[norm] { normalizedTokens[at] = token } else {
                    normalizedAt[norm] = normalizedTokens.count
                    normalizedTokens.append(token)
                }
            } else {
                let token = BpeAddedTokens.Token(cps: entry.content, id: tid, lstrip: entry.lstrip, rstrip: entry.rstrip)
                if let at = rawAt[entry.content] { rawTokens[at] = token } else {
                    rawAt[entry.content] = rawTokens.count
                    rawTokens.append(token)
                }
            }
        }
        if (n..<max(n, spec.vocabSize)).contains(where: { added[$0] == nil }) || (added.keys.max() ?? n - 1) >= spec.vocabSize {
            throw EdgeM3Error("\(file): \(n) vocabulary and \(added.count) added tokens do not make the manifest's " +
                              "vocab_size \(spec.vocabSize) ids")
        }
        for key in EdgeM3Contract.specialKeys {
            let string = spec.specialTokens[key]!  // the decoder requires every key
            let id = spec.special[key]!
            let have = added[id] ?? (id >= 0 && id < n ? tokens[id] : nil)
            if have != string.unicodeScalars.map({ $0.value }) {
                throw EdgeM3Error("\(file): special token \(key) '\(string)' is not id \(id)")
            }
        }
        byteIds = BpeData.byteChars.map { table[[$0]] ?? -1 }
        ids = table
        self.ranks = ranks
        self.merged = merged
        self.options = options
        raw = BpeAddedTokens(rawTokens)
        normalized = BpeAddedTokens(normalizedTokens)
        bos = spec.special.bos
        eos = spec.special.eos
        pad = spec.special.pad
    }

    /// `[CLS] ... [SEP]`: EdgeM3Tokenizer.encode.
    public func encode(_ text: String, maxLength: Int? = nil) throws -> [Int] {
        try encode(scalars: text.unicodeScalars.map { $0.value }, maxLength: maxLength)
    }

    /// EdgeM3Tokenizer.encode(utf16:maxLength:).
    public func encode(utf16 units: [UInt16], maxLength: Int? = nil) throws -> [Int] {
        try encode(scalars: SpecialSplit.checkedScalars(units), maxLength: maxLength)
    }

    private func encode(scalars cps: [UInt32], maxLength: Int?) throws -> [Int] {
        if let m = maxLength, m < 2 { throw EdgeM3Error("max_length \(m): must be an integer of at least 2") }
        var out: [Int] = [bos]
        out.reserveCapacity(cps.count + 2)
        raw.split(cps, into: &out) { a, b, out in
            let part = Array(cps[a..<b])
            let norm = options.normalizer == "NFC" ? Self.normalize(part) : part
            normalized.split(norm, into: &out) { c, d, out in pieces(norm, c, d, &out) }
        }
        out.append(eos)
        if let m = maxLength, out.count > m {
            out.removeSubrange((m - 1)...)
            out.append(eos)
        }
        return out
    }

    /// ByteLevel's pieces of `cps[from ..< to]` (not empty), each as BPE ids.
    private func pieces(_ cps: [UInt32], _ from: Int, _ to: Int, _ out: inout [Int]) {
        var text = cps, a = from, b = to
        if options.addPrefixSpace && cps[from] != 0x20 {
            text = [0x20] + cps[from..<to]
            a = 0
            b = text.count
        }
        if !options.useRegex {
            word(text, a, b, &out)
            return
        }
        var i = a
        while i < b {
            let e = Self.matchEnd(text, i, b)
            word(text, i, e, &out)
            i = e
        }
    }

    /// BPE of one piece: its bytes' characters merged by rank (tokenizers' Word.merge_all).
    private func word(_ cps: [UInt32], _ from: Int, _ to: Int, _ out: inout [Int]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4 * (to - from))
        for k in from..<to { bytes.append(contentsOf: UTF8.encode(Unicode.Scalar(cps[k])!)!) }
        if options.ignoreMerges, let whole = ids[bytes.map { BpeData.byteChars[Int($0)] }] {
            out.append(whole)
            return
        }
        var c: [Int] = []
        c.reserveCapacity(bytes.count)
        var unkOpen = false  // the last symbol is an unk that the next may fuse with
        for x in bytes {
            let tid = byteIds[Int(x)]
            if tid >= 0 {
                c.append(tid)
                unkOpen = false
            } else if unkId >= 0 && !(unkOpen && options.fuseUnk) {
                c.append(unkId)
                unkOpen = true
            }
        }
        let n = c.count
        if n < 2 {
            out += c
            return
        }
        var nxt = Array(1...n), prv = Array(-1..<(n - 1))
        var alive = [Bool](repeating: true, count: n)
        var heap = BpeHeap()
        for k in 0..<(n - 1) {
            if let r = ranks[Self.key(c[k], c[k + 1])] { heap.push(r << 32 | k) }
        }
        while let top = heap.pop() {
            let rank = top >> 32, pos = top & 0xFFFF_FFFF
            let right = nxt[pos]
            if !alive[pos] || right >= n { continue }
            let newId = merged[rank]
            guard let r = ranks[Self.key(c[pos], c[right])], merged[r] == newId else { continue }  // stale
            c[pos] = newId
            alive[right] = false
            nxt[pos] = nxt[right]
            if nxt[pos] < n { prv[nxt[pos]] = pos }
            if prv[pos] >= 0, let m = ranks[Self.key(c[prv[pos]], newId)] { heap.push(m << 32 | prv[pos]) }
            if nxt[pos] < n, let m = ranks[Self.key(newId, c[nxt[pos]])] { heap.push(m << 32 | pos) }
        }
        for k in 0..<n where alive[k] { out.append(c[k]) }
    }

    @inline(__always)
    private static func key(_ left: Int, _ right: Int) -> Int { left << 32 | right }

    /// Where the GPT-2 pattern's match at `i` ends (`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
    /// ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, the alternatives in that order; every position matches).
    static func matchEnd(_ t: [UInt32], _ i: Int, _ n: Int) -> Int {
        let c = t[i]
        if c == 0x27 && i + 1 < n {  // '
            let a = t[i + 1]
            if a == 0x73 || a == 0x74 || a == 0x6D || a == 0x64 { return i + 2 }  // s t m d
            if i + 2 < n {
                let b = t[i + 2]
                if (a == 0x72 || a == 0x76) && b == 0x65 { return i + 3 }  // re ve
                if a == 0x6C && b == 0x6C { return i + 3 }  // ll
            }
        }
        let d = BpeData.shared
        func run(_ from: Int, _ ok: (UInt32) -> Bool) -> Int {
            var j = from
            while j < n && ok(t[j]) { j += 1 }
            return j
        }
        let other: (UInt32) -> Bool = { !d.space.contains($0) && !d.letter.contains($0) && !d.number.contains($0) }
        if c == 0x20 && i + 1 < n {  // ` ?X+` with the space, when X follows it
            let h = t[i + 1]
            if d.letter.contains(h) { return run(i + 2, d.letter.contains) }
            if d.number.contains(h) { return run(i + 2, d.number.contains) }
            if !d.space.contains(h) { return run(i + 2, other) }
        } else if !d.space.contains(c) {  // ` ?X+` without it
            if d.letter.contains(c) { return run(i + 1, d.letter.contains) }
            if d.number.contains(c) { return run(i + 1, d.number.contains) }
            return run(i + 1, other)
        }
        let e = run(i + 1, d.space.contains)
        return e == n || e - i == 1 ? e : e - 1  // \s+(?!\S) backs off one; else \s+
    }

    /// The reference's NFC (edge_m3.tokenizer.bpe.nfc): full canonical decomposition, canonical
    /// order, then canonical composition (the reference's pairs; Hangul by the algorithm).
    static func normalize(_ text: [UInt32]) -> [UInt32] {
        if !text.contains(where: { $0 >= 0x80 }) { return text }
        let wp = WordPieceData.shared
        var nfd: [UInt32] = []
        nfd.reserveCapacity(text.count + 8)
        for c in text {
            if let m = wp.decompose[c] { nfd += m } else { nfd.append(c) }
        }
        var i = 0
        while i < nfd.count {
            guard wp.combining[nfd[i]] != nil else { i += 1; continue }
            var j = i + 1
            while j < nfd.count && wp.combining[nfd[j]] != nil { j += 1 }
            if j - i > 1 {
                // A stable sort: by class, then by position.
                let run = nfd[i..<j].enumerated().sorted { (wp.combining[$0.element]!, $0.offset) < (wp.combining[$1.element]!, $1.offset) }
                for (k, x) in run.enumerated() { nfd[i + k] = x.element }
            }
            i = j
        }
        let compose = BpeData.shared.compose
        var out: [UInt32] = []
        out.reserveCapacity(nfd.count)
        var starter = -1  // index in out of the last starter
        for ch in nfd {
            let cc = wp.combining[ch] ?? 0
            if starter >= 0 {
                let last = out.count - 1 > starter ? wp.combining[out[out.count - 1]] ?? 0 : -1
                if last == -1 || (0 < last && last < cc) {  // not blocked: nothing between, or a lower class
                    if let joined = compose[UInt64(out[starter]) << 32 | UInt64(ch)] ?? hangulPair(out[starter], ch) {
                        out[starter] = joined
                        continue
                    }
                }
            }
            if cc == 0 { starter = out.count }
            out.append(ch)
        }
        return out
    }

    /// The syllable L+V or LV+T compose to, if any.
    private static func hangulPair(_ a: UInt32, _ b: UInt32) -> UInt32? {
        typealias T = WordPieceTables
        if a >= T.lbase && a < T.lbase + T.lcount && b >= T.vbase && b < T.vbase + T.vcount {
            return T.sbase + ((a - T.lbase) * T.vcount + b - T.vbase) * T.tcount
        }
        if a >= T.sbase && a < T.sbase + T.lcount * T.vcount * T.tcount && (a - T.sbase) % T.tcount == 0
            && b > T.tbase && b < T.tbase + T.tcount {
            return a + b - T.tbase
        }
        return nil
    }

    /// A token in a one-line message: in single quotes, as Python's repr shows most.
    private static func quoted(_ cps: [UInt32]) -> String {
        var s = "'"
        for c in cps {
            switch c {
            case 0x5C: s += "\\\\"
            case 0x0A: s += "\\n"
            default: s.unicodeScalars.append(Unicode.Scalar(c) ?? "\u{FFFD}")
            }
        }
        return s + "'"
    }

    /// bpe.json as read: tokens as code points.
    private struct FileData {
        var vocab: [[UInt32]]
        var merges: [([UInt32], [UInt32])]
        var added: [(id: Int, content: [UInt32], normalized: Bool, lstrip: Bool, rstrip: Bool)]
    }

    /// bpe.json: {"vocab": [token by id], "merges": [[left, right] by rank], "added_tokens": [{"id",
    /// "content", "special", "normalized", "lstrip", "rstrip"}]}, checked as read_bpe does.
    private static func readBpe(_ bytes: [UInt8], file: String) throws -> FileData {
        let parsed: BpeFile
        do {
            parsed = try JSONDecoder().decode(BpeFile.self, from: Data(bytes))
        } catch {
            throw EdgeM3Error("\(file): not valid JSON (not a JSON object)")
        }
        func scalars(_ s: String) -> [UInt32] { s.unicodeScalars.map { $0.value } }
        guard let vocabStrings = parsed.vocab else {
            throw EdgeM3Error(parsed.vocabIsList ? "\(file): vocab must be distinct non-empty strings"
                              : "\(file): vocab is missing or not a list, not supported here")
        }
        let vocab = vocabStrings.map(scalars)
        if vocab.contains(where: { $0.isEmpty }) || Set(vocab).count != vocab.count {
            throw EdgeM3Error("\(file): vocab must be distinct non-empty strings")
        }
        guard let mergeLists = parsed.merges else {
            throw EdgeM3Error(parsed.mergesIsList ? "\(file): merges must be [left, right] pairs of strings"
                              : "\(file): merges is missing or not a list, not supported here")
        }
        var merges: [([UInt32], [UInt32])] = []
        merges.reserveCapacity(mergeLists.count)
        for m in mergeLists {
            guard m.count == 2 else { throw EdgeM3Error("\(file): merges must be [left, right] pairs of strings") }
            merges.append((scalars(m[0]), scalars(m[1])))
        }
        guard let entries = parsed.added else {
            throw EdgeM3Error("\(file): added_tokens is missing or not a list, not supported here")
        }
        var added: [(id: Int, content: [UInt32], normalized: Bool, lstrip: Bool, rstrip: Bool)] = []
        for (i, e) in entries.enumerated() {
            guard let e, let id = e.id, let content = e.content, !content.isEmpty, e.special != nil,
                  let normalized = e.normalized, let lstrip = e.lstrip, let rstrip = e.rstrip else {
                throw EdgeM3Error("\(file): added_tokens entry \(i) needs id, content and the flags " +
                                  "special, normalized, lstrip, rstrip")
            }
            added.append((id, scalars(content), normalized, lstrip, rstrip))
        }
        return FileData(vocab: vocab, merges: merges, added: added)
    }
}

/// bpe.json's top level, decoded leniently: a field of the wrong shape is nil (with whether it was
/// a list at all), so that the reader can name it as edge_m3.tokenizer.bpe.read_bpe does.
nonisolated private struct BpeFile: Decodable {
    let vocab: [String]?
    let vocabIsList: Bool
    let merges: [[String]]?
    let mergesIsList: Bool
    let added: [Entry?]?

    /// An added_tokens entry; a field of another type (or missing) is nil.
    struct Entry: Decodable {
        let id: Int?, content: String?, special: Bool?, normalized: Bool?, lstrip: Bool?, rstrip: Bool?

        enum Keys: String, CodingKey { case id, content, special, normalized, lstrip, rstrip }

        init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            id = try? c.decode(Int.self, forKey: .id)
            content = try? c.decode(String.self, forKey: .content)
            special = try? c.decode(Bool.self, forKey: .special)
            normalized = try? c.decode(Bool.self, forKey: .normalized)
            lstrip = try? c.decode(Bool.self, forKey: .lstrip)
            rstrip = try? c.decode(Bool.self, forKey: .rstrip)
        }
    }

    /// Any JSON value, ignored (to tell a list of the wrong items from no list).
    struct Anything: Decodable {
        init(from decoder: Decoder) throws {}
    }

    /// An entry that is not an object is nil.
    struct MaybeEntry: Decodable {
        let entry: Entry?
        init(from decoder: Decoder) throws { entry = try? Entry(from: decoder) }
    }

    enum Keys: String, CodingKey { case vocab, merges, added = "added_tokens" }

    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        vocab = try? c.decode([String].self, forKey: .vocab)
        vocabIsList = (try? c.decode([Anything].self, forKey: .vocab)) != nil
        merges = try? c.decode([[String]].self, forKey: .merges)
        mergesIsList = (try? c.decode([Anything].self, forKey: .merges)) != nil
        added = (try? c.decode([MaybeEntry].self, forKey: .added))?.map { $0.entry }
    }
}

/// One of AddedVocabulary's two matchers: leftmost-longest over its tokens (edge_m3.tokenizer.bpe._AddedTokens).
nonisolated struct BpeAddedTokens: Sendable {
    /// A token's code points (a normalized one's normalized), id and flags.
    struct Token: Sendable {
        let cps: [UInt32]
        let id: Int
        let lstrip: Bool
        let rstrip: Bool
    }

    /// Longest first (a stable sort): at a position, the longest match wins.
    private let sorted: [Token]

    init(_ tokens: [Token]) {
        sorted = tokens.enumerated().sorted { ($0.element.cps.count, -$0.offset) > ($1.element.cps.count, -$1.offset) }
            .map { $0.element }
    }

    /// The ids of the matches in `cps` into `out`, `between(a, b, &out)` for each text between.
    func split(_ cps: [UInt32], into out: inout [Int], _ between: (Int, Int, inout [Int]) -> Void) {
        let space = BpeData.shared.space
        let to = cps.count
        var pos = 0  // the end of the text handed out so far
        var i = 0  // where the search goes on: the last match's end (not its stripped end)
        while i < to {
            guard let m = matchAt(cps, i) else { i += 1; continue }
            var start = i, stop = i + m.cps.count
            if m.lstrip { while start > pos && space.contains(cps[start - 1]) { start -= 1 } }
            if m.rstrip { while stop < to && space.contains(cps[stop]) { stop += 1 } }
            if pos < start { between(pos, start, &out) }
            out.append(m.id)
            i += m.cps.count
            pos = stop
        }
        if pos < to { between(pos, to, &out) }
    }

    private func matchAt(_ cps: [UInt32], _ i: Int) -> Token? {
        for t in sorted where t.cps.count <= cps.count - i && t.cps[0] == cps[i] {
            var same = true
            for j in 1..<t.cps.count where cps[i + j] != t.cps[j] { same = false; break }
            if same { return t }
        }
        return nil
    }
}

/// A binary min-heap of (rank << 32 | position): lowest rank first, then leftmost (Python's heapq order).
nonisolated struct BpeHeap {
    private var a: [Int] = []

    mutating func push(_ v: Int) {
        a.append(v)
        var i = a.count - 1
        while i > 0 {
            let p = (i - 1) / 2
            if a[p] <= v { break }
            a[i] = a[p]
            i = p
        }
        a[i] = v
    }

    mutating func pop() -> Int? {
        guard let last = a.popLast() else { return nil }
        guard !a.isEmpty else { return last }
        let top = a[0]
        var i = 0
        while true {
            var child = 2 * i + 1
            if child >= a.count { break }
            if child + 1 < a.count && a[child + 1] < a[child] { child += 1 }
            if a[child] >= last { break }
            a[i] = a[child]
            i = child
        }
        a[i] = last
        return top
    }
}

/// BpeTables decoded once: the GPT-2 pattern's classes and NFC's compositions; GPT-2's byte characters.
nonisolated struct BpeData: Sendable {
    static let shared = BpeData()

    let letter = CodePointSet(BpeTables.letter)
    let number = CodePointSet(BpeTables.number)
    let space = CodePointSet(BpeTables.space)
    /// (first << 32 | second) -> the composite.
    let compose: [UInt64: UInt32] = {
        var out: [UInt64: UInt32] = [:]
        for item in WordPieceData.items(BpeTables.compositions) {
            let parts = item.split(separator: ":")
            let pair = parts[1].split(separator: " ").map { UInt64($0, radix: 16)! }
            out[pair[0] << 32 | pair[1]] = UInt32(parts[0], radix: 16)!
        }
        return out
    }()

    /// GPT-2's byte -> character map: printable Latin-1 bytes stay, the other 68 move to U+0100.. in byte order.
    static let byteChars: [UInt32] = {
        var out: [UInt32] = []
        var next: UInt32 = 0
        for b in UInt32(0)..<256 {
            if (0x21...0x7E).contains(b) || (0xA1...0xAC).contains(b) || (0xAE...0xFF).contains(b) {
                out.append(b)
            } else {
                out.append(256 + next)
                next += 1
            }
        }
        return out
    }()
}
