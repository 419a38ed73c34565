import XCTest
import EdgeM3

/// The Swift tokenizer's API on a hand-written model. Its ids against the Python pipeline on real
/// vocabularies (corpus, random text, every code point) are checked by tests/test_kit_tokenizer.py
/// through the edge-m3-tokenize executable.
final class TokenizerTests: XCTestCase {
    /// A SentencePiece model in protobuf wire format: <unk> (UNKNOWN), <s> and </s> (CONTROL), then pieces.
    static func model(_ pieces: [(String, Float)]) -> [UInt8] {
        func varint(_ v: Int) -> [UInt8] {
            var v = v, out: [UInt8] = []
            while v >= 0x80 { out.append(UInt8(v & 0x7F | 0x80)); v >>= 7 }
            return out + [UInt8(v)]
        }
        func piece(_ s: String, _ score: Float, _ type: Int) -> [UInt8] {
            let text = Array(s.utf8)
            let bits = score.bitPattern
            var body: [UInt8] = [0x0A] + varint(text.count) + text
            body += [0x15, UInt8(bits & 0xFF), UInt8(bits >> 8 & 0xFF), UInt8(bits >> 16 & 0xFF), UInt8(bits >> 24)]
            body += [0x18] + varint(type)
            return [0x0A] + varint(body.count) + body
        }
        var out = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3)
        for (s, score) in pieces { out += piece(s, score, 1) }
        return out
    }

    static let ids = ["bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 9]

    /// Pieces 3... of the hand-written model: ids 4... (id_offset 1).
    static let pieces: [(String, Float)] = [("\u{2581}a", -1), ("a", -2), ("b", -3), ("\u{2581}", -4), ("bb", -5)]

    func tokenizer() throws -> XlmrTokenizer {
        try XlmrTokenizer(model: TokenizerTests.model(TokenizerTests.pieces), specialIds: TokenizerTests.ids,
                          spUnkId: 0, idOffset: 1, vocabSize: 10)
    }

    func testEncodeMapsPiecesAndSpecials() throws {
        let tok = try tokenizer()
        // pieces 3.. are ▁a a b ▁ bb -> ids 4.. ; <unk> -> 3; specials in the text -> their ids.
        XCTAssertEqual(try tok.encode("a b"), [0, 4, 7, 6, 2])
        XCTAssertEqual(try tok.encode("abb"), [0, 4, 8, 2])
        XCTAssertEqual(try tok.encode("a<mask>a"), [0, 4, 9, 4, 2])
        XCTAssertEqual(try tok.encode("a zz a"), [0, 4, 7, 3, 4, 2])  // unknown run fused into one <unk>
        XCTAssertEqual(try tok.encode(" \t\n"), [0, 2])
        XCTAssertEqual(try tok.encode("a a a a", maxLength: 3), [0, 4, 2])
    }

    /// encodeChunks (docs/index-format.md, "Passages and chunks"): windows of L - 2 ids between
    /// <s> and </s>, the default overlap, a text that fits is one chunk, the first chunk is the
    /// truncated text, refusals, and an L so large W * CHUNK_OVERLAP_PERCENT would overflow.
    func testEncodeChunks() throws {
        let tok = try tokenizer()
        let text = String(repeating: "a ", count: 9) + "a"  // ten "▁a" pieces: ids 4 x 10
        let whole = try tok.encode(text, maxLength: nil)
        XCTAssertEqual(whole.count, 12)
        // L 6: W 4, overlap 4 * 25 / 100 = 1, starts 0, 3, 6 (6 + 4 >= 10)
        let chunks = try tok.encodeChunks(text, maxLength: 6)
        XCTAssertEqual(chunks.map(\.count), [6, 6, 6])
        XCTAssertEqual(chunks[0], try tok.encode(text, maxLength: 6))
        XCTAssertTrue(chunks.allSatisfy { $0.first == 0 && $0.last == 2 })
        XCTAssertEqual(try tok.encodeChunks(text, maxLength: 6, overlap: 0).map(\.count), [6, 6, 4])
        XCTAssertEqual(try tok.encodeChunks(text, maxLength: 6, overlap: 3).count, 7)
        XCTAssertEqual(try tok.encodeChunks(text, maxLength: 12), [whole])
        XCTAssertEqual(try tok.encodeChunks(text, maxLength: Int.max), [whole])
        XCTAssertEqual(try tok.encodeChunks("", maxLength: 3), [[0, 2]])
        for (l, o) in [(2, nil), (6, 4), (6, -1)] as [(Int, Int?)] {
            XCTAssertThrowsError(try tok.encodeChunks(text, maxLength: l, overlap: o)) { error in
                XCTAssertEqual((error as? EdgeM3Error)?.kind, .invalidInput)
            }
        }
    }

    func testInvalidInputGetsThePythonMessages() throws {
        let tok = try tokenizer()
        XCTAssertThrowsError(try tok.encode(utf16: [0x61, 0xD83D, 0xDE00, 0xDC00])) { error in
            XCTAssertEqual((error as? EdgeM3Error)?.message, "text is not valid Unicode (lone surrogate at index 2)")
        }
        XCTAssertEqual(try tok.encode(utf16: Array("a b".utf16)), try tok.encode("a b"))
        XCTAssertThrowsError(try tok.encode("a", maxLength: 1)) { error in
            XCTAssertEqual((error as? EdgeM3Error)?.message, "max_length 1: must be an integer of at least 2")
        }
        XCTAssertThrowsError(try XlmrTokenizer(model: [0x0A, 0x05, 0x01], specialIds: TokenizerTests.ids,
                                               spUnkId: 0, idOffset: 1, vocabSize: 10)) { error in
            XCTAssertTrue("\(error)".contains("not a SentencePiece model"), "\(error)")
        }
        XCTAssertThrowsError(try XlmrTokenizer(model: TokenizerTests.model([("a", -1)]), specialIds: TokenizerTests.ids,
                                               spUnkId: 0, idOffset: 1, vocabSize: 3)) { error in
            XCTAssertTrue("\(error)".contains("vocab_size 3"), "\(error)")
        }
    }
}

/// The WordPiece tokenizer's API on a hand-written vocabulary, and its typed errors. Its ids against
/// the Python pipeline on real vocabularies are checked by tests/test_kit_tokenizer.py.
final class WordPieceTokenizerTests: XCTestCase {
    static let vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hel", "##lo", "world", "!", "cafe", "中"]

    /// The manifest's tokenizer entry, as the builder writes it for `vocab`, with `edit` applied.
    static func spec(_ edit: (inout [String: Any]) -> Void = { _ in }) throws -> TokenizerSpec {
        var entry: [String: Any] = [
            "file": "vocab.txt", "kind": "wordpiece", "sp_unk_id": 0, "id_offset": 0, "vocab_size": vocab.count,
            "vocab_map": NSNull(), "special_ids": ["bos": 2, "pad": 0, "eos": 3, "unk": 1, "mask": 4],
            "special_tokens": ["bos": "[CLS]", "pad": "[PAD]", "eos": "[SEP]", "unk": "[UNK]", "mask": "[MASK]"],
            "options": ["clean_text": true, "handle_chinese_chars": true, "strip_accents": true, "lowercase": true,
                        "continuing_subword_prefix": "##", "max_input_chars_per_word": 100] as [String: Any],
        ]
        edit(&entry)
        return try JSONDecoder().decode(TokenizerSpec.self, from: JSONSerialization.data(withJSONObject: entry))
    }

    static func bytes(_ tokens: [String]) -> [UInt8] { Array(tokens.map { $0 + "\n" }.joined().utf8) }

    func testEncode() throws {
        let tok = try openTokenizer(spec: Self.spec()) { _ in Self.bytes(Self.vocab) }
        XCTAssertTrue(tok is WordPieceTokenizer)
        XCTAssertEqual([tok.bos, tok.eos, tok.pad], [2, 3, 0])
        XCTAssertEqual(try tok.encode("Hello, WORLD!", maxLength: nil), [2, 5, 6, 1, 7, 8, 3])
        XCTAssertEqual(try tok.encode("Hello, WORLD!", maxLength: 3), [2, 5, 3])
        XCTAssertEqual(try tok.encode("Café中x[MASK]", maxLength: nil), [2, 9, 10, 1, 4, 3])
        XCTAssertEqual(try tok.encode("cafe\u{301}", maxLength: nil), [2, 9, 3])  // é and e + U+0301 alike
        XCTAssertEqual(try tok.encode(utf16: Array("hello".utf16), maxLength: nil), [2, 5, 6, 3])
        XCTAssertThrowsError(try tok.encode(utf16: [0x61, 0xDC00], maxLength: nil)) { error in
            XCTAssertEqual((error as? EdgeM3Error)?.message, "text is not valid Unicode (lone surrogate at index 1)")
        }
    }

    /// Tokens are code points, never Swift Strings (whose == is canonical equivalence).
    func testTokensAreCodePoints() throws {
        let spec = try Self.spec { $0["vocab_size"] = Self.vocab.count + 1 }
        let tok = try WordPieceTokenizer(vocab: Self.bytes(Self.vocab + ["cafe\u{301}"]), spec: spec)
        var options = spec.options!
        options.stripAccents = false
        var keep = spec
        keep.options = options
        let cased = try WordPieceTokenizer(vocab: Self.bytes(Self.vocab + ["café"]), spec: keep)
        XCTAssertEqual(try tok.encode("cafe\u{301}", maxLength: nil), [2, 9, 3])  // stripped first
        XCTAssertEqual(try cased.encode("café", maxLength: nil), [2, 11, 3])
        XCTAssertEqual(try cased.encode("cafe\u{301}", maxLength: nil), [2, 1, 3])  // not the token "café"
    }

    func testBadBundlesAreTypedErrors() throws {
        func refused(_ message: String, _ make: () throws -> Any) {
            XCTAssertThrowsError(try make()) { error in
                guard let e = error as? EdgeM3Error else { return XCTFail("not an EdgeM3Error: \(error)") }
                XCTAssertEqual(e.kind, .invalidInput)
                XCTAssertTrue(e.message.contains(message), e.message)
            }
        }
        let good = Self.bytes(Self.vocab)
        refused("tokenizer.kind 'bpe' unknown (known: \(EdgeM3Contract.tokenizerKinds.joined(separator: ", ")))") {
            try Self.spec { $0["kind"] = "bpe" }
        }
        refused("tokenizer options missing (required for kind wordpiece)") {
            try WordPieceTokenizer(vocab: good, spec: Self.spec { $0["options"] = nil })
        }
        refused("11 tokens, but the manifest says vocab_size 12") {
            try WordPieceTokenizer(vocab: good, spec: Self.spec { $0["vocab_size"] = 12 })
        }
        refused("vocab_map must be null") {
            try WordPieceTokenizer(vocab: good, spec: Self.spec { $0["vocab_map"] = ["file": "vocab_map.json"] })
        }
        refused("vocabulary line 7 'hel' repeats line 6") {
            try WordPieceTokenizer(vocab: Self.bytes(Self.vocab.enumerated().map { $0.offset == 6 ? "hel" : $0.element }),
                                   spec: Self.spec())
        }
        refused("vocabulary line 2 '[UNK]\\r' is empty or holds a line break") {
            try WordPieceTokenizer(vocab: Self.bytes(Self.vocab.map { $0 == "[UNK]" ? "[UNK]\r" : $0 }), spec: Self.spec())
        }
        refused("vocab.txt: not UTF-8") { try WordPieceTokenizer(vocab: good + [0xFF, 0x0A], spec: Self.spec()) }
        refused("special token mask '[MASK]' is not line 6") {
            try WordPieceTokenizer(vocab: good, spec: Self.spec { $0["special_ids"] = ["bos": 2, "pad": 0, "eos": 3, "unk": 1, "mask": 5] })
        }
        var xlmr = try Self.spec()
        xlmr.kind = "bpe"
        refused("tokenizer.kind 'bpe' unknown") { try openTokenizer(spec: xlmr) { _ in good } }
    }
}

/// The byte-level BPE tokenizer's API on a hand-written bpe.json, and its typed errors. Its ids
/// against `tokenizers` and the Python pipeline are checked by tests/test_kit_tokenizer.py.
final class BpeTokenizerTests: XCTestCase {
    static let vocab = ["h", "e", "l", "o", "Ġ", "w", "r", "d", "he", "ll", "hell", "hello", "Ġw"]
    static let merges = [["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"], ["Ġ", "w"]]

    /// bpe.json as the builder writes it for `vocab` (the five specials added at 13...17), edited.
    static func file(_ edit: (inout [String: Any]) -> Void = { _ in }) throws -> [UInt8] {
        let added: [[String: Any]] = ["[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"].enumerated().map {
            ["id": 13 + $0.offset, "content": $0.element, "special": true, "normalized": false,
             "lstrip": $0.element == "[MASK]", "rstrip": false]
        }
        var d: [String: Any] = ["vocab": vocab, "merges": merges, "added_tokens": added]
        edit(&d)
        return [UInt8](try JSONSerialization.data(withJSONObject: d))
    }

    /// The manifest's tokenizer entry for that file, with `edit` applied.
    static func spec(_ edit: (inout [String: Any]) -> Void = { _ in }) throws -> TokenizerSpec {
        var entry: [String: Any] = [
            "file": "bpe.json", "kind": "byte-level-bpe", "sp_unk_id": 0, "id_offset": 0, "vocab_size": 18,
            "vocab_map": NSNull(), "special_ids": ["bos": 13, "pad": 15, "eos": 14, "unk": 16, "mask": 17],
            "special_tokens": ["bos": "[CLS]", "pad": "[PAD]", "eos": "[SEP]", "unk": "[UNK]", "mask": "[MASK]"],
            "options": ["normalizer": "NFC", "add_prefix_space": false, "use_regex": true, "ignore_merges": false,
                        "fuse_unk": false, "unk_token": ""] as [String: Any],
        ]
        edit(&entry)
        return try JSONDecoder().decode(TokenizerSpec.self, from: JSONSerialization.data(withJSONObject: entry))
    }

    /// The ids edge_m3.tokenizer.bpe.ByteLevelBPETokenizer gives on the same file.
    func testEncode() throws {
        let spec = try Self.spec()
        XCTAssertNil(spec.options)
        XCTAssertEqual(spec.bpeOptions?.normalizer, "NFC")
        let tok = try openTokenizer(spec: spec) { _ in try Self.file() }
        XCTAssertTrue(tok is BpeTokenizer)
        XCTAssertEqual([tok.bos, tok.eos, tok.pad], [13, 14, 15])
        XCTAssertEqual(try tok.encode("hello world", maxLength: nil), [13, 11, 12, 3, 6, 2, 7, 14])
        XCTAssertEqual(try tok.encode("hello world!", maxLength: 3), [13, 11, 14])  // "!" is no token: dropped
        XCTAssertEqual(try tok.encode("hello [MASK]", maxLength: nil), [13, 11, 17, 14])  // lstrip
        XCTAssertEqual(try tok.encode("hell\u{f6}", maxLength: nil), [13, 10, 14])
        XCTAssertEqual(try tok.encode(utf16: Array("hello".utf16), maxLength: nil), [13, 11, 14])
        XCTAssertThrowsError(try tok.encode(utf16: [0x61, 0xDC00], maxLength: nil)) { error in
            XCTAssertEqual((error as? EdgeM3Error)?.message, "text is not valid Unicode (lone surrogate at index 1)")
        }
    }

    func testBadBundlesAreTypedErrors() throws {
        func refused(_ message: String, _ make: () throws -> Any) {
            XCTAssertThrowsError(try make()) { error in
                guard let e = error as? EdgeM3Error else { return XCTFail("not an EdgeM3Error: \(error)") }
                XCTAssertEqual(e.kind, .invalidInput)
                XCTAssertTrue(e.message.contains(message), e.message)
            }
        }
        let good = try Self.file()
        refused("bpe.json: not valid JSON") { try BpeTokenizer(bpe: Array(good.prefix(20)), spec: Self.spec()) }
        refused("bpe.json: vocab is missing or not a list") {
            try BpeTokenizer(bpe: Self.file { $0["vocab"] = nil }, spec: Self.spec())
        }
        refused("bpe.json: vocab must be distinct non-empty strings") {
            try BpeTokenizer(bpe: Self.file { $0["vocab"] = Self.vocab + ["h"] }, spec: Self.spec())
        }
        refused("bpe.json: merge ['x', 'nope'] is not of vocabulary tokens") {
            try BpeTokenizer(bpe: Self.file { $0["merges"] = Self.merges + [["x", "nope"]] }, spec: Self.spec())
        }
        refused("bpe.json: merges must be [left, right] pairs of strings") {
            try BpeTokenizer(bpe: Self.file { $0["merges"] = Self.merges + [["x"]] }, spec: Self.spec())
        }
        refused("bpe.json: added_tokens entry 0 needs id, content and the flags") {
            try BpeTokenizer(bpe: Self.file { d in
                var added = d["added_tokens"] as! [[String: Any]]
                added[0]["lstrip"] = 1
                d["added_tokens"] = added
            }, spec: Self.spec())
        }
        refused("13 vocabulary and 5 added tokens do not make the manifest's vocab_size 19 ids") {
            try BpeTokenizer(bpe: good, spec: Self.spec { $0["vocab_size"] = 19 })
        }
        refused("tokenizer options missing (required for kind byte-level-bpe)") {
            try BpeTokenizer(bpe: good, spec: Self.spec { $0["options"] = nil })
        }
        refused("tokenizer options.normalizer 'NFKC' unknown (known: '', 'NFC')") {
            try BpeTokenizer(bpe: good, spec: Self.spec { e in
                var options = e["options"] as! [String: Any]
                options["normalizer"] = "NFKC"
                e["options"] = options
            })
        }
        refused("vocab_map must be null and id_offset 0") {
            try BpeTokenizer(bpe: good, spec: Self.spec { $0["vocab_map"] = ["file": "vocab_map.json"] })
        }
        refused("special token mask '[MASK]' is not id 12") {
            try BpeTokenizer(bpe: good, spec: Self.spec { $0["special_ids"] = ["bos": 13, "pad": 15, "eos": 14, "unk": 16, "mask": 12] })
        }
    }
}
