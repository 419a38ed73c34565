import Foundation

// The fields of sentencepiece.bpe.model that tokenization needs, read straight from the protobuf
// wire format (no protobuf library): ModelProto.pieces (piece, score, type),
// trainer_spec.model_type and normalizer_spec.precompiled_charsmap. Everything else in the file is
// skipped. What it refuses is what edge_m3/tokenizer/spmodel.py refuses (issue 38's differential):
// field number 0 or a wire type 3, 4, 6, 7 in any message it reads (the model, a piece, trainer_spec,
// normalizer_spec), a known field of the wrong wire type, a field past its message, no pieces, a
// model type other than unigram.
// The same reader as android_assets/src/main/java/dev/edgem3/SentencePieceModel.kt.

/// Pieces as code points (one pool), their float32 scores and types, and the charsmap bytes.
nonisolated struct SentencePieceModel {
    // sentencepiece_model.proto: SentencePiece.Type
    static let normal = 1
    static let unknown = 2
    static let control = 3
    static let userDefined = 4
    // sentencepiece_model.proto: TrainerSpec.ModelType
    static let unigram: UInt64 = 1
    static let modelTypes: [UInt64: String] = [1: "unigram", 2: "bpe", 3: "word", 4: "char"]

    /// Code points of piece `i`: `codePoints[starts[i] ..< starts[i + 1]]`.
    let codePoints: [UInt32]
    let starts: [Int]
    let scores: [Float]
    let types: [Int]
    let charsmap: [UInt8]

    var count: Int { return scores.count }

    /// Piece `i` as a String (for messages).
    func piece(_ i: Int) -> String {
        var s = String.UnicodeScalarView()
        for k in starts[i]..<starts[i + 1] { if let u = Unicode.Scalar(codePoints[k]) { s.append(u) } }
        return String(s)
    }

    /// Parses the model file; any malformed byte is a EdgeM3Error naming `file`.
    static func parse(_ bytes: [UInt8], file: String) throws -> SentencePieceModel {
        var p = ProtoParser(b: bytes)
        do {
            return try p.model()
        } catch let exc as ProtoError {
            throw EdgeM3Error("\(file): not a SentencePiece model (\(exc.message))")
        }
    }
}

nonisolated private struct ProtoError: Error { let message: String }

/// A known field of the wrong wire type (Python's spmodel._expect).
nonisolated private func expect(_ field: UInt64, _ wire: Int, _ want: Int, _ what: String) throws {
    if wire != want { throw ProtoError(message: "\(what) (field \(field)) has wire type \(wire), expected \(want)") }
}

nonisolated private struct ProtoParser {
    let b: [UInt8]
    var pool: [UInt32] = []
    var starts: [Int] = []
    var scores: [Float] = []
    var types: [Int] = []
    var charsmap: [UInt8] = []
    var modelType = SentencePieceModel.unigram
    var modelTypeWide = false  // a varint past 64 bits: not unigram (Python reads it whole)
    /// The position after the last varint or length read.
    var next = 0
    /// Whether the last varint read held bits past 64 (Python's reader keeps them).
    var wide = false

    init(b: [UInt8]) {
        self.b = b
        pool.reserveCapacity(b.count / 2)
    }

    mutating func model() throws -> SentencePieceModel {
        try fields(0, b.count, "model") { p, field, wire, pos in
            if field == 1 {  // pieces
                try expect(field, wire, 2, "pieces")
                let end = try p.lengthEnd(pos)
                try p.piece(p.next, end)
                return end
            }
            if field == 2 {  // trainer_spec
                try expect(field, wire, 2, "trainer_spec")
                let end = try p.lengthEnd(pos)
                try p.trainer(p.next, end)
                return end
            }
            if field == 3 {  // normalizer_spec
                try expect(field, wire, 2, "normalizer_spec")
                let end = try p.lengthEnd(pos)
                try p.normalizer(p.next, end)
                return end
            }
            return -1
        }
        if scores.isEmpty { throw ProtoError(message: "no pieces") }
        if modelType != SentencePieceModel.unigram || modelTypeWide {
            let name = modelTypeWide ? "past 2^64" : SentencePieceModel.modelTypes[modelType] ?? String(modelType)
            throw ProtoError(message: "model type \(name), expected unigram (XLM-R's)")
        }
        starts.append(pool.count)
        return SentencePieceModel(codePoints: pool, starts: starts, scores: scores, types: types, charsmap: charsmap)
    }

    /// Calls `field(&self, number, wireType, pos)` for each field of the message in `b[start ..< end]`:
    /// it returns the position after the field, or -1 to skip it.
    mutating func fields(_ start: Int, _ end: Int, _ what: String,
                         _ field: (inout ProtoParser, UInt64, Int, Int) throws -> Int) throws {
        var pos = start
        while pos < end {
            let key = try varint(pos)
            // Field number 0 is not protobuf (issue 38: Python refused it, the kits skipped it).
            if key >> 3 == 0 && !wide { throw ProtoError(message: "field number 0 at byte \(pos)") }
            let wire = Int(key & 7), at = next
            // A number past 64 bits is no known field: never truncated into one.
            let after = try field(&self, wide ? UInt64.max : key >> 3, wire, at)
            pos = after >= 0 ? after : try skip(next, wire, end)
            if pos > end { throw ProtoError(message: "\(what) field past its message at byte \(pos)") }
        }
    }

    mutating func varint(_ start: Int) throws -> UInt64 {
        var pos = start, shift: UInt64 = 0, out: UInt64 = 0
        wide = false
        while true {
            if pos >= b.count || shift > 63 { throw ProtoError(message: "truncated varint at byte \(start)") }
            let c = b[pos]
            pos += 1
            out |= UInt64(c & 0x7F) << shift
            if shift == 63 && c & 0x7E != 0 { wide = true }
            if c < 0x80 { break }
            shift += 7
        }
        next = pos
        return out
    }

    /// A length-delimited field's end; its content starts at `next`.
    mutating func lengthEnd(_ start: Int) throws -> Int {
        let len = try varint(start)
        if len > UInt64(b.count - next) { throw ProtoError(message: "length \(len) past the end at byte \(start)") }
        return next + Int(len)
    }

    mutating func skip(_ start: Int, _ wire: Int, _ limit: Int) throws -> Int {
        let end: Int
        switch wire {
        case 0: _ = try varint(start); end = next
        case 1: end = start + 8
        case 2: end = try lengthEnd(start)
        case 5: end = start + 4
        default: throw ProtoError(message: "wire type \(wire) at byte \(start)")
        }
        if end > limit { throw ProtoError(message: "field past the end at byte \(start)") }
        return end
    }

    func fixed32(_ pos: Int) -> UInt32 {
        return UInt32(b[pos]) | UInt32(b[pos + 1]) << 8 | UInt32(b[pos + 2]) << 16 | UInt32(b[pos + 3]) << 24
    }

    /// One SentencePiece message: piece = 1 (string), score = 2 (float), type = 3 (enum, NORMAL default).
    mutating func piece(_ start: Int, _ end: Int) throws {
        let pieceStart = pool.count
        var score: Float = 0
        var type = SentencePieceModel.normal
        try fields(start, end, "piece") { p, field, wire, pos in
            if field == 1 {
                try expect(field, wire, 2, "piece")
                let stop = try p.lengthEnd(pos)
                p.pool.removeSubrange(pieceStart...)  // proto2: the last value wins
                if stop <= end && !Utf8.decode(p.b, p.next, stop, into: &p.pool) {
                    throw ProtoError(message: "piece is not valid UTF-8 at byte \(p.next)")
                }
                return stop
            }
            if field == 2 {
                try expect(field, wire, 5, "score")
                if pos + 4 <= end { score = Float(bitPattern: p.fixed32(pos)) }
                return pos + 4
            }
            if field == 3 {
                try expect(field, wire, 0, "type")
                let v = try p.varint(pos)
                // An enum is an int32: a larger varint (-1 is 2^64 - 1) is refused, as by Python.
                if p.wide || v > UInt64(Int32.max) {
                    throw ProtoError(message: "a piece type \(v)\(p.wide ? "+" : "") is past int32")
                }
                type = Int(v)
                return p.next
            }
            return -1
        }
        // An empty or missing piece string (issue 38: Python refused it, the kits took it).
        if pool.count == pieceStart { throw ProtoError(message: "a piece has no string at byte \(start)") }
        starts.append(pieceStart)
        scores.append(score)
        types.append(type)
    }

    /// TrainerSpec: model_type = 3 (enum, UNIGRAM default); the rest is not used by the reference.
    mutating func trainer(_ start: Int, _ end: Int) throws {
        try fields(start, end, "trainer_spec") { p, field, wire, pos in
            if field == 3 {
                try expect(field, wire, 0, "trainer_spec.model_type")
                p.modelType = try p.varint(pos)
                p.modelTypeWide = p.wide
                return p.next
            }
            return -1
        }
    }

    /// NormalizerSpec: precompiled_charsmap = 2 (bytes); the rest is not used by the reference.
    mutating func normalizer(_ start: Int, _ end: Int) throws {
        try fields(start, end, "normalizer") { p, field, wire, pos in
            if field == 2 {
                try expect(field, wire, 2, "normalizer_spec.precompiled_charsmap")
                let stop = try p.lengthEnd(pos)
                if stop <= end { p.charsmap = Array(p.b[p.next..<stop]) }
                return stop
            }
            return -1
        }
    }
}

/// UTF-8 <-> code points, strict, for the model file, the charsmap and graphemes.
nonisolated enum Utf8 {
    /// Appends the code points of `b[start ..< end]` to `out`; false on a malformed sequence
    /// (overlong forms, surrogates, values past U+10FFFF).
    static func decode(_ b: [UInt8], _ start: Int, _ end: Int, into out: inout [UInt32]) -> Bool {
        var i = start
        while i < end {
            let c = UInt32(b[i])
            if c < 0x80 {
                out.append(c)
                i += 1
                continue
            }
            let len: Int, min: UInt32
            var cp: UInt32
            switch c {
            case 0xC2...0xDF: len = 2; cp = c & 0x1F; min = 0x80
            case 0xE0...0xEF: len = 3; cp = c & 0x0F; min = 0x800
            case 0xF0...0xF4: len = 4; cp = c & 0x07; min = 0x10000
            default: return false
            }
            if i + len > end { return false }
            for k in 1..<len {
                let d = UInt32(b[i + k])
                if d & 0xC0 != 0x80 { return false }
                cp = (cp << 6) | (d & 0x3F)
            }
            if cp < min || cp > 0x10FFFF || (0xD800...0xDFFF).contains(cp) { return false }
            out.append(cp)
            i += len
        }
        return true
    }

    /// Appends the bytes of one code point to `out`.
    @inline(__always)
    static func encode(_ cp: UInt32, into out: inout [UInt8]) {
        if cp < 0x80 {
            out.append(UInt8(cp))
        } else if cp < 0x800 {
            out.append(UInt8(0xC0 | (cp >> 6)))
            out.append(UInt8(0x80 | (cp & 0x3F)))
        } else if cp < 0x10000 {
            out.append(UInt8(0xE0 | (cp >> 12)))
            out.append(UInt8(0x80 | ((cp >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (cp & 0x3F)))
        } else {
            out.append(UInt8(0xF0 | (cp >> 18)))
            out.append(UInt8(0x80 | ((cp >> 12) & 0x3F)))
            out.append(UInt8(0x80 | ((cp >> 6) & 0x3F)))
            out.append(UInt8(0x80 | (cp & 0x3F)))
        }
    }

    @inline(__always)
    static func length(_ cp: UInt32) -> Int {
        return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4
    }
}
