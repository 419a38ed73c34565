import Foundation
@testable import EdgeM3

/// A small strict JSON reader for golden.json, the one file compared bit for bit (test target only:
/// the kit itself reads manifest.json and vocab_map.json with Codable).
///
/// Objects become `[String: Any]`, arrays `[Any]`, integers `Int`, other numbers `Double`
/// (Swift's `Double(String)` is correctly rounded, so a float32 written by Python's `json` as the
/// shortest repr of its float64 value reads back bit for bit after `Float(_:)`), plus `String`,
/// `Bool` and `NSNull` for null. Why not JSONDecoder / JSONSerialization: on Apple platforms
/// they may go through `NSDecimalNumber` for long decimals, whose `doubleValue` is not
/// guaranteed to be the nearest double.
enum StrictJSON {
    static func parse(_ data: Data) throws -> Any {
        var p = StrictJSONParser(bytes: [UInt8](data))
        p.skipSpace()
        let value = try p.value()
        p.skipSpace()
        if p.pos != p.bytes.count { throw p.error("trailing characters") }
        return value
    }

    static func parse(contentsOf url: URL) throws -> Any { try parse(Data(contentsOf: url)) }
}

struct StrictJSONParser {
    let bytes: [UInt8]
    var pos = 0
    var depth = 0
    /// Arrays and objects nested deeper are refused, not recursed into until the stack overflows
    /// (issue 38: 20,000 `[` overflowed the stack; golden.json nests 5 deep).
    static let maxDepth = 128

    init(bytes: [UInt8]) { self.bytes = bytes }

    func error(_ what: String) -> EdgeM3Error { return EdgeM3Error("JSON: \(what) at offset \(pos)") }

    mutating func skipSpace() {
        while pos < bytes.count && (bytes[pos] == 0x20 || bytes[pos] == 0x0A || bytes[pos] == 0x0D || bytes[pos] == 0x09) {
            pos += 1
        }
    }

    func startsWith(_ word: String) -> Bool {
        let w = Array(word.utf8)
        if pos + w.count > bytes.count { return false }
        for i in 0..<w.count where bytes[pos + i] != w[i] { return false }
        return true
    }

    mutating func value() throws -> Any {
        if pos >= bytes.count { throw error("unexpected end") }
        let c = bytes[pos]
        if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
            depth += 1
            defer { depth -= 1 }
            if depth > StrictJSONParser.maxDepth { throw error("nested deeper than \(StrictJSONParser.maxDepth)") }
            return c == UInt8(ascii: "{") ? try obj() : try array()
        }
        if c == UInt8(ascii: "\"") { return try string() }
        if c == UInt8(ascii: "-") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) { return try number() }
        if startsWith("true") { pos += 4; return true }
        if startsWith("false") { pos += 5; return false }
        if startsWith("null") { pos += 4; return NSNull() }
        throw error("unexpected byte \(c)")
    }

    mutating func obj() throws -> [String: Any] {
        var out = [String: Any]()
        pos += 1
        skipSpace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "}") { pos += 1; return out }
        while true {
            skipSpace()
            if pos >= bytes.count || bytes[pos] != UInt8(ascii: "\"") { throw error("expected a key") }
            let key = try string()
            skipSpace()
            if pos >= bytes.count || bytes[pos] != UInt8(ascii: ":") { throw error("expected ':'") }
            pos += 1
            skipSpace()
            out[key] = try value()
            skipSpace()
            if pos >= bytes.count { throw error("unterminated object") }
            if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
            if bytes[pos] == UInt8(ascii: "}") { pos += 1; return out }
            throw error("expected ',' or '}'")
        }
    }

    mutating func array() throws -> [Any] {
        var out = [Any]()
        pos += 1
        skipSpace()
        if pos < bytes.count && bytes[pos] == UInt8(ascii: "]") { pos += 1; return out }
        while true {
            skipSpace()
            out.append(try value())
            skipSpace()
            if pos >= bytes.count { throw error("unterminated array") }
            if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
            if bytes[pos] == UInt8(ascii: "]") { pos += 1; return out }
            throw error("expected ',' or ']'")
        }
    }

    mutating func hex4() throws -> UInt32 {
        if pos + 4 > bytes.count { throw error("short \\u escape") }
        guard let v = UInt32(String(decoding: bytes[pos..<pos + 4], as: UTF8.self), radix: 16) else {
            throw error("bad \\u escape")
        }
        pos += 4
        return v
    }

    mutating func string() throws -> String {
        pos += 1
        var buf = [UInt8]()  // UTF-8 bytes of the decoded string
        while true {
            if pos >= bytes.count { throw error("unterminated string") }
            let c = bytes[pos]
            pos += 1
            if c == UInt8(ascii: "\"") { return String(decoding: buf, as: UTF8.self) }
            if c != UInt8(ascii: "\\") { buf.append(c); continue }
            if pos >= bytes.count { throw error("unterminated escape") }
            let e = bytes[pos]
            pos += 1
            switch e {
            case UInt8(ascii: "\""): buf.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): buf.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "/"): buf.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): buf.append(0x08)
            case UInt8(ascii: "f"): buf.append(0x0C)
            case UInt8(ascii: "n"): buf.append(0x0A)
            case UInt8(ascii: "r"): buf.append(0x0D)
            case UInt8(ascii: "t"): buf.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                // A surrogate pair arrives as two escapes; a lone surrogate becomes U+FFFD.
                if scalar >= 0xD800 && scalar <= 0xDBFF && pos + 1 < bytes.count
                    && bytes[pos] == UInt8(ascii: "\\") && bytes[pos + 1] == UInt8(ascii: "u") {
                    pos += 2
                    let low = try hex4()
                    scalar = (low >= 0xDC00 && low <= 0xDFFF) ? 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00) : 0xFFFD
                }
                let u = Unicode.Scalar(scalar) ?? Unicode.Scalar(0xFFFD as UInt32)!
                buf.append(contentsOf: Array(String(Character(u)).utf8))
            default:
                throw error("bad escape '\\\(Character(Unicode.Scalar(e)))'")
            }
        }
    }

    mutating func number() throws -> Any {
        let start = pos
        var integral = true
        while pos < bytes.count {
            let c = bytes[pos]
            if (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: "+") {
                pos += 1
            } else if c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") {
                integral = false
                pos += 1
            } else {
                break
            }
        }
        let t = String(decoding: bytes[start..<pos], as: UTF8.self)
        if integral, let i = Int(t) { return i }
        guard let d = Double(t) else { throw error("bad number '\(t)'") }
        return d
    }
}
