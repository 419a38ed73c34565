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
