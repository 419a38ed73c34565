import Foundation

// The device tokenizer in plain Swift (Foundation only). Its ids equal edge_m3.tokenizer.Tokenizer's,
// which equal the reference's (transformers' XLMRobertaTokenizer, what FlagEmbedding loads), on
// every text; tests/test_kit_tokenizer.py checks that on the corpus, random text and every code
// point. The same algorithm as android_assets/src/main/java/dev/edgem3/XlmrTokenizer.kt (change
// both together); each step ports one Python module:
//   1. special-token strings in the raw text -> their ids, leftmost-longest (edge_m3/tokenizer.py;
//      SpecialSplit in EdgeM3Tokenizer.swift, shared with WordPieceTokenizer);
//   2. the model's precompiled charsmap one grapheme cluster at a time (edge_m3/normalizer.py), the
//      clusters cut by the reference's Unicode 16 rules (edge_m3/graphemes.py; the per-code-point
//      data is generated into TokenizerTables.swift, never taken from the OS's ICU);
//   3. split on Unicode whitespace, "▁" before each word, a new piece before every "▁";
//   4. the reference's unigram Viterbi and its tie rule (edge_m3/unigram.py), XLM-R's id mapping.
// Everything counts code points, as Python's str does. Immutable after init: safe to share.

/// `encode(text, maxLength:)` -> XLM-R ids `<s> ... </s>`, exactly as the Python pipeline gives them.
///
/// Built from the bundle's sentencepiece.bpe.model and the manifest's `tokenizer` entry
/// (`openTokenizer(directory:spec:)` picks this class for kind `xlmr-sentencepiece`). It gives
/// original-vocabulary ids only: a trimmed bundle's table rows are `Pipeline.rows(for:)`
/// (vocab_map.json), not the tokenizer's business.
nonisolated public final class XlmrTokenizer: EdgeM3Tokenizer {
    public let bos: Int
    public let eos: Int
    public let pad: Int
    private let table: PieceTable
    private let scores: [Double]
    private let unkScore: Double
    private let maxLen: Int
    private let idOf: [Int]
    private let split: SpecialSplit
    private let charsmap: CharsMap?

    /// - Parameters:
    ///   - model: the bytes of sentencepiece.bpe.model (`file` names it in messages).
    ///   - specialIds / specialTokens: the manifest's `special_ids` and `special_tokens` (keys bos, pad,
    ///     eos, unk, mask); `specialTokens` nil: XLM-R's strings, as for manifests without the key.
    public init(model: [UInt8], specialIds: [String: Int], specialTokens: [String: String]? = nil,
                spUnkId: Int, idOffset: Int, vocabSize: Int, file: String = EdgeM3Contract.sentencepiece) throws {
        let m = try SentencePieceModel.parse(model, file: file)
        let n = m.count
        var pairs: [(String, Int)] = []
        for key in EdgeM3Contract.specialKeys {
            guard let id = specialIds[key] else { throw EdgeM3Error("manifest.json: tokenizer.special_ids: missing \"\(key)\"") }
            let string: String
            if let tokens = specialTokens {
                guard let s = tokens[key] else {
                    throw EdgeM3Error("manifest.json: tokenizer.special_tokens: missing \"\(key)\"")
                }
                string = s
            } else {
                string = TokenizerTables.defaultSpecialTokens.first { $0.0 == key }!.1
            }
            pairs.append((string, id))
        }
        let notModel = "\(file): not a SentencePiece model"
        let unknown = (0..<n).filter { m.types[$0] == SentencePieceModel.unknown }
        if n < 3 || unknown != [0] {
            throw EdgeM3Error("\(notModel) (not an XLM-R-style model: expected exactly one <unk> piece, at id 0)")
        }
        // The reference's vocabulary: fairseq's specials (pieces 0..2 here) at score 0, the pieces, then
        // the special strings the model lacks, also at score 0 (edge_m3.unigram.UnigramModel).
        var t = PieceTable(pool: m.codePoints, starts: m.starts, capacity: n + pairs.count)
        for i in 0..<n where !t.add(i) {
            throw EdgeM3Error("\(notModel) (piece \(m.piece(i).debugDescription) occurs twice in the model)")  // escaped: one line
        }
        var added: [[UInt32]] = []
        for (string, _) in pairs {
            let cps = string.unicodeScalars.map { $0.value }
            if t.find(cps, 0, cps.count) < 0 {
                t.addExtra(n + added.count, cps)
                added.append(cps)
            }
        }
        table = t
        var sc = [Double](repeating: 0, count: n + added.count)
        for i in 3..<n { sc[i] = Double(m.scores[i]) }
        scores = sc
        unkScore = (sc.min() ?? 0) - TokenizerTables.unkPenalty
        var longest = 1
        for i in 0..<n { longest = max(longest, m.starts[i + 1] - m.starts[i]) }
        for a in added { longest = max(longest, a.count) }
        maxLen = longest

        if n - 1 + idOffset >= vocabSize {
            throw EdgeM3Error("\(file): \(n) pieces map past the manifest's vocab_size \(vocabSize) " +
                                 "(wrong SentencePiece model?)")
        }
        // The model's embedding table has vocab_size rows: a special id past it reads past it (issue 38;
        // edge_m3.tokenizer.Tokenizer refuses the same).
        let outside = EdgeM3Contract.specialKeys.filter { specialIds[$0]! < 0 || specialIds[$0]! >= vocabSize }
        if !outside.isEmpty {
            throw EdgeM3Error("\(EdgeM3Contract.manifest): tokenizer special_ids {"
                              + outside.map { "'\($0)': \(specialIds[$0]!)" }.joined(separator: ", ")
                              + "} lie outside vocab_size \(vocabSize)")
        }
        let odd = (3..<n).filter { m.types[$0] == SentencePieceModel.control || m.types[$0] == SentencePieceModel.userDefined }
        if !odd.isEmpty || spUnkId != 0 {
            throw EdgeM3Error("\(file): not an XLM-R SentencePiece model (control or user-defined pieces " +
                                 "past </s>: \(Array(odd.prefix(3))), or <unk> not at id \(spUnkId))")
        }
        // SentencePiece id (then the added specials) -> model id; the specials' strings map to their
        // ids wherever the reference's vocabulary holds them.
        var ids = (0..<sc.count).map { $0 + idOffset }
        ids[0] = specialIds["unk"]!
        for (string, id) in pairs {
            let cps = string.unicodeScalars.map { $0.value }
            let p = t.find(cps, 0, cps.count)
            if p >= 0 { ids[p] = id }
        }
        idOf = ids
        // Special-token strings in the text -> their ids (the reference's added tokens).
        split = SpecialSplit(pairs, bos: specialIds["bos"]!, eos: specialIds["eos"]!)
        charsmap = try m.charsmap.isEmpty ? nil : CharsMap(m.charsmap, file: file)
        bos = specialIds["bos"]!
        eos = specialIds["eos"]!
        pad = specialIds["pad"]!
    }

    /// The same from the manifest's `tokenizer` entry, already decoded.
    public convenience init(model: [UInt8], spec: TokenizerSpec) throws {
        var ids: [String: Int] = [:]
        for key in EdgeM3Contract.specialKeys { ids[key] = spec.special[key] }
        try self.init(model: model, specialIds: ids, specialTokens: spec.specialTokens, spUnkId: spec.spUnkId,
                      idOffset: spec.idOffset, vocabSize: spec.vocabSize, file: spec.file)
    }

    /// `<s> ... </s>`: EdgeM3Tokenizer.encode.
    public func encode(_ text: String, maxLength: Int? = nil) throws -> [Int] {
        try split.encode(text.unicodeScalars.map { $0.value }, maxLength: maxLength) { try words($0, $1, $2, &$3) }
    }

    /// EdgeM3Tokenizer.encode(utf16:maxLength:).
    public func encode(utf16 units: [UInt16], maxLength: Int? = nil) throws -> [Int] {
        try split.encode(SpecialSplit.checkedScalars(units), maxLength: maxLength) { try words($0, $1, $2, &$3) }
    }

    /// Normalise `cps[from ..< to]`, split on whitespace, segment each word (edge_m3.unigram.encode_words).
    private func words(_ cps: [UInt32], _ from: Int, _ to: Int, _ out: inout [Int]) throws {
        var norm: [UInt32] = []
        norm.reserveCapacity(to - from + 8)
        if let cm = charsmap { try cm.normalize(cps, from, to, into: &norm) } else { norm.append(contentsOf: cps[from..<to]) }
        let meta = TokenizerTables.meta
        var word: [UInt32] = []
        var i = 0
        let n = norm.count
        while i < n {
            while i < n && Whitespace.contains(norm[i]) { i += 1 }
            if i >= n { break }
            var j = i
            while j < n && !Whitespace.contains(norm[j]) { j += 1 }
            // "▁" before the word unless there; then a piece boundary before every "▁".
            word.removeAll(keepingCapacity: true)
            if norm[i] != meta { word.append(meta) }
            word.append(contentsOf: norm[i..<j])
            var start = 0
            for k in 1...word.count where k == word.count || word[k] == meta {
                viterbi(word, start, k, &out)
                start = k
            }
            i = j
        }
    }

    /// Best segmentation of `w[s ..< e]`, tie for tie as the reference (edge_m3.unigram.encode_word).
    private func viterbi(_ w: [UInt32], _ s: Int, _ e: Int, _ out: inout [Int]) {
        let n = e - s
        var score = [Double](repeating: 0, count: n + 1)
        var startOf = [Int](repeating: -1, count: n + 1)
        var pieceId = [Int](repeating: 0, count: n + 1)
        w.withUnsafeBufferPointer { wb in
            for start in 0..<n {
                let base = score[start]
                var single = false
                var h: UInt32 = 0
                let limit = min(n, start + maxLen)
                for end in (start + 1)...limit {
                    h = h &* 31 &+ wb[s + end - 1]
                    let pid = table.find(wb, s + start, end - start, h)
                    if pid < 0 { continue }
                    let cand = base + scores[pid]
                    if startOf[end] < 0 || cand > score[end] {
                        score[end] = cand
                        startOf[end] = start
                        pieceId[end] = pid
                    }
                    if end == start + 1 { single = true }
                }
                if !single {
                    let end = start + 1
                    let cand = base + unkScore
                    if startOf[end] < 0 || cand > score[end] {
                        score[end] = cand
                        startOf[end] = start
                        pieceId[end] = 0
                    }
                }
            }
        }
        // Back from the end; runs of <unk> fuse into one.
        var rev: [Int] = []
        var end = n
        while end > 0 {
            let pid = pieceId[end]
            if !(pid == 0 && rev.last == 0) { rev.append(pid) }
            end = startOf[end]
        }
        for pid in rev.reversed() { out.append(idOf[pid]) }
    }
}

/// Unicode White_Space (TokenizerTables.whitespace) as a lookup table.
nonisolated private enum Whitespace {
    static let table: [Bool] = {
        var t = [Bool](repeating: false, count: Int(TokenizerTables.whitespace.max()!) + 1)
        for c in TokenizerTables.whitespace { t[Int(c)] = true }
        return t
    }()

    @inline(__always)
    static func contains(_ cp: UInt32) -> Bool { return Int(cp) < table.count && table[Int(cp)] }
}

/// Open-addressing hash of pieces as code-point sequences: lookups need no substring.
nonisolated private struct PieceTable: Sendable {
    let pool: [UInt32]
    let starts: [Int]
    let bits: Int
    let mask: Int
    var slots: [Int32]  // piece id + 1, 0 = empty
    var hashes: [UInt32]
    var extra: [Int: [UInt32]] = [:]  // added specials' code points by id

    init(pool: [UInt32], starts: [Int], capacity: Int) {
        self.pool = pool
        self.starts = starts
        var b = 4
        while (1 << b) < capacity * 2 { b += 1 }
        bits = b
        mask = (1 << b) - 1
        slots = [Int32](repeating: 0, count: 1 << b)
        hashes = [UInt32](repeating: 0, count: capacity)
    }

    @inline(__always)
    func slot(_ h: UInt32) -> Int { return Int((h &* 0x9E37_79B9) >> UInt32(32 - bits)) }

    static func hash(_ a: UnsafeBufferPointer<UInt32>, _ from: Int, _ len: Int) -> UInt32 {
        var h: UInt32 = 0
        for k in from..<(from + len) { h = h &* 31 &+ a[k] }
        return h
    }

    /// Adds piece `id` of the pool; false when an equal piece is already there.
    mutating func add(_ id: Int) -> Bool {
        let from = starts[id], len = starts[id + 1] - starts[id]
        let (h, found) = pool.withUnsafeBufferPointer { pb -> (UInt32, Int) in
            let h = PieceTable.hash(pb, from, len)
            return (h, find(pb, from, len, h))
        }
        if found >= 0 { return false }
        insert(id, h)
        return true
    }

    mutating func addExtra(_ id: Int, _ cps: [UInt32]) {
        extra[id] = cps
        insert(id, cps.withUnsafeBufferPointer { PieceTable.hash($0, 0, cps.count) })
    }

    private mutating func insert(_ id: Int, _ h: UInt32) {
        hashes[id] = h
        var i = slot(h)
        while slots[i] != 0 { i = (i + 1) & mask }
        slots[i] = Int32(id + 1)
    }

    func find(_ a: [UInt32], _ from: Int, _ len: Int) -> Int {
        return a.withUnsafeBufferPointer { find($0, from, len, PieceTable.hash($0, from, len)) }
    }

    /// The id of the piece equal to `a[from ..< from + len]` whose hash is `h`, or -1.
    @inline(__always)
    func find(_ a: UnsafeBufferPointer<UInt32>, _ from: Int, _ len: Int, _ h: UInt32) -> Int {
        var i = slot(h)
        while true {
            let v = Int(slots[i])
            if v == 0 { return -1 }
            let id = v - 1
            if hashes[id] == h && equal(id, a, from, len) { return id }
            i = (i + 1) & mask
        }
    }

    private func equal(_ id: Int, _ a: UnsafeBufferPointer<UInt32>, _ from: Int, _ len: Int) -> Bool {
        if id < starts.count - 1 {
            let s = starts[id]
            if starts[id + 1] - s != len { return false }
            for k in 0..<len where pool[s + k] != a[from + k] { return false }
            return true
        }
        guard let cps = extra[id], cps.count == len else { return false }
        for k in 0..<len where cps[k] != a[from + k] { return false }
        return true
    }
}

/// SentencePiece's precompiled charsmap (a darts-clone trie plus replacement strings), applied one
/// grapheme cluster at a time as the reference does (edge_m3.normalizer.CharsMap).
nonisolated private struct CharsMap: Sendable {
    let units: [UInt32]
    let normalized: [UInt8]
    let file: String

    init(_ blob: [UInt8], file: String) throws {
        self.file = file
        if blob.count < 4 { throw EdgeM3Error("\(file): not a SentencePiece model (charsmap too short)") }
        let le32 = { (at: Int) -> UInt32 in
            UInt32(blob[at]) | UInt32(blob[at + 1]) << 8 | UInt32(blob[at + 2]) << 16 | UInt32(blob[at + 3]) << 24
        }
        let trieSize = Int(le32(0))
        if trieSize == 0 || trieSize % 4 != 0 || 4 + trieSize > blob.count {  // an empty trie: no units[0]
            throw EdgeM3Error("\(file): not a SentencePiece model (charsmap trie size is corrupt)")
        }
        units = (0..<(trieSize / 4)).map { le32(4 + 4 * $0) }
        normalized = Array(blob[(4 + trieSize)...])
    }

    @inline(__always)
    private func offset(_ unit: UInt32) -> Int { return Int((unit >> 10) << ((unit & (1 << 9)) >> 6)) }

    /// Value of the shortest trie key that is a prefix of `key`, or -1. A value past the trie's
    /// end is a corrupt model (issue 38: it trapped).
    private func firstPrefixValue(_ key: [UInt8]) throws -> Int {
        var pos = offset(units[0])
        for byte in key {
            let c = UInt32(byte)
            if c == 0 { return -1 }
            pos ^= Int(c)
            if pos >= units.count { return -1 }
            let unit = units[pos]
            if unit & 0x8000_00FF != c { return -1 }
            pos ^= offset(unit)
            if (unit >> 8) & 1 != 0 {
                guard pos < units.count else { throw EdgeM3Error("\(file): corrupt charsmap (a value past the trie's end)") }
                return Int(units[pos] & 0x7FFF_FFFF)
            }
        }
        return -1
    }

    /// Appends the replacement of `key` when its shortest charsmap key matches; false otherwise.
    private func transform(_ key: [UInt8], into out: inout [UInt32]) throws -> Bool {
        let start = try firstPrefixValue(key)
        if start < 0 || start >= normalized.count { return false }
        var end = start
        while end < normalized.count && normalized[end] != 0 { end += 1 }
        if !Utf8.decode(normalized, start, end, into: &out) {  // the reference fails too; valid models never
            throw EdgeM3Error("charsmap: replacement at byte \(start) is not valid UTF-8")
        }
        return true
    }

    /// Grapheme by grapheme: a cluster under wholeGraphemeBytes bytes replaced whole by the value of
    /// its shortest matching key, else each character alone.
    func normalize(_ cps: [UInt32], _ from: Int, _ to: Int, into out: inout [UInt32]) throws {
        var key: [UInt8] = []
        key.reserveCapacity(4 * TokenizerTables.wholeGraphemeBytes)
        try Graphemes.split(cps, from, to) { gs, ge in
            var bytes = 0
            for k in gs..<ge {
                bytes += Utf8.length(cps[k])
                if bytes >= TokenizerTables.wholeGraphemeBytes { break }
            }
            if bytes < TokenizerTables.wholeGraphemeBytes {
                key.removeAll(keepingCapacity: true)
                for k in gs..<ge { Utf8.encode(cps[k], into: &key) }
                if try transform(key, into: &out) { return }
            }
            for k in gs..<ge {
                key.removeAll(keepingCapacity: true)
                Utf8.encode(cps[k], into: &key)
                if try !transform(key, into: &out) { out.append(cps[k]) }
            }
        }
    }
}

/// Extended grapheme clusters as the reference cuts them (edge_m3.graphemes: the Rust crate
/// unicode-segmentation's UAX #29 rules, Unicode 16, with its state for GB9c, GB11 and GB12/13).
nonisolated enum Graphemes {
    private static let runs: (starts: [UInt32], cats: [UInt8], bmp: [UInt8]) = {
        var starts: [UInt32] = [], cats: [UInt8] = []
        var cp: UInt32 = 0, gap: UInt32 = 0
        for ch in TokenizerTables.categoryRuns.utf8 {
            if ch >= 65 && ch <= 90 {  // 'A'...'Z': a run's category
                cp += gap
                gap = 0
                starts.append(cp)
                cats.append(ch - 65)
            } else {
                gap = gap * 36 + UInt32(ch <= 57 ? ch - 48 : ch - 97 + 10)
            }
        }
        var bmp = [UInt8](repeating: 0, count: 0x10000)
        var r = 0
        for c in 0..<0x10000 {
            while r + 1 < starts.count && starts[r + 1] <= UInt32(c) { r += 1 }
            bmp[c] = cats[r]
        }
        return (starts, cats, bmp)
    }()

    /// The category of one code point (TokenizerTables' numbering, linkerFlag included).
    @inline(__always)
    static func category(_ cp: UInt32) -> Int {
        if cp < 0x10000 { return Int(runs.bmp[Int(cp)]) }
        let starts = runs.starts
        var lo = 0, hi = starts.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) >> 1
            if starts[mid] <= cp { lo = mid } else { hi = mid - 1 }
        }
        return Int(runs.cats[lo])
    }

    private typealias T = TokenizerTables

    /// No boundary between two categories, given the state of the text before (UAX #29).
    private static func joins(_ before: Int, _ after: Int, _ state: Int) -> Bool {
        if before == T.cr && after == T.lf { return true }  // GB3
        if before == T.control || before == T.cr || before == T.lf ||
            after == T.control || after == T.cr || after == T.lf { return false }  // GB4, GB5
        if before == T.l && (after == T.l || after == T.v || after == T.lv || after == T.lvt) { return true }  // GB6
        if (before == T.lv || before == T.v) && (after == T.v || after == T.t) { return true }  // GB7
        if (before == T.lvt || before == T.t) && after == T.t { return true }  // GB8
        if after == T.extend || after == T.zwj || after == T.spacingMark || before == T.prepend { return true }  // GB9-9b
        if after == T.consonant { return state & incbLinked != 0 }  // GB9c
        if before == T.zwj && after == T.picto { return state & emojiZwj != 0 }  // GB11
        if before == T.ri && after == T.ri { return state & risOdd != 0 }  // GB12, GB13
        return false  // GB999
    }

    // The crate's state as bits: conjunct run and linked (GB9c), pictographic run and armed ZWJ
    // (GB11), odd count of regional indicators (GB12/13).
    private static let incbRun = 1, incbLinked = 2, extpicRun = 4, emojiZwj = 8, risOdd = 16

    /// The state after code point `cp` of category `raw` (edge_m3.graphemes.graphemes' updates).
    private static func nextState(_ state: Int, _ cp: UInt32, _ raw: Int) -> Int {
        switch raw & 15 {
        case T.extend:
            // emoji_zwj and ris_odd reset; a conjunct run carries on (and may get linked) unless ZWNJ.
            if state & incbRun != 0 && cp != T.zwnj {
                let linked = state & incbLinked != 0 || raw & T.linkerFlag != 0
                return (state & extpicRun) | incbRun | (linked ? incbLinked : 0)
            }
            return state & extpicRun
        case T.zwj:
            // InCB=Extend: a conjunct run carries on; ZWJ arms GB11 after a pictographic run.
            return (state & (incbRun | incbLinked)) | (state & extpicRun != 0 ? emojiZwj : 0)
        case T.picto: return extpicRun
        case T.ri: return state & risOdd != 0 ? 0 : risOdd
        case T.consonant: return incbRun
        default: return 0
        }
    }

    /// Calls `emit(start, end)` for each cluster of `cps[from ..< to]`, in order.
    @inline(__always)
    static func split(_ cps: [UInt32], _ from: Int, _ to: Int, _ emit: (Int, Int) throws -> Void) rethrows {
        var start = from, before = -1, state = 0
        for i in from..<to {
            let raw = category(cps[i])
            let cat = raw & 15
            if before >= 0 && !joins(before, cat, state) {
                try emit(start, i)
                start = i
            }
            state = nextState(state, cps[i], raw)
            before = cat
        }
        if to > from { try emit(start, to) }
    }
}
