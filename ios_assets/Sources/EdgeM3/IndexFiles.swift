import Foundation  // open, write, fsync, close: Foundation brings Darwin / Glibc along

// The files a compaction writes: a buffered, hashed, fsynced writer and index.json's JSON.

nonisolated private func posixWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { write(fd, p, n) }

nonisolated private func posixClose(_ fd: Int32) { close(fd) }

/// fsync of a folder, so a rename or link in it survives a power cut.
nonisolated func syncFolder(_ folder: URL) {
    let fd = open(folder.path, O_RDONLY)
    if fd >= 0 {
        fsync(fd)
        close(fd)
    }
}

/// A file written through a buffer, hashed on the way, fsynced on close.
nonisolated struct BinWriter {
    private let url: URL
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var hasher = StreamingSHA256()
    private var size = 0

    init(_ url: URL) throws {
        self.url = url
        fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        guard fd >= 0 else { throw EdgeM3Error("\(url.path): cannot create (\(String(cString: strerror(errno))))", kind: .writeFailed) }
        buffer.reserveCapacity(1 << 20)
    }

    mutating func write(_ b: UnsafeRawBufferPointer) throws {
        buffer.append(contentsOf: b)
        if buffer.count >= 1 << 20 { try flush() }
    }

    mutating func write(_ b: [UInt8]) throws { try b.withUnsafeBytes { try write($0) } }

    mutating func write<T>(value: T) throws { try withUnsafeBytes(of: value) { try write($0) } }

    mutating func write<T>(array: [T]) throws { try array.withUnsafeBytes { try write($0) } }

    private mutating func flush() throws {
        try buffer.withUnsafeBytes { b in
            hasher.update(b)
            var at = 0
            while at < b.count {
                let n = posixWrite(fd, b.baseAddress! + at, b.count - at)
                guard n > 0 else {
                    throw EdgeM3Error("\(url.path): cannot write (\(String(cString: strerror(errno))))", kind: .writeFailed)
                }
                at += n
            }
        }
        size += buffer.count
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes, fsyncs and closes: the file's sha256 and size.
    mutating func close() throws -> (String, Int) {
        defer { posixClose(fd) }
        try flush()
        guard fsync(fd) == 0 else { throw EdgeM3Error("\(url.path): cannot sync (\(String(cString: strerror(errno))))", kind: .writeFailed) }
        return (hasher.hexDigest(), size)
    }
}

/// Just enough JSON to write index.json as Python's `json.dumps(manifest, indent=1)` does.
nonisolated indirect enum JSONValue {
    case null
    case int(Int)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    func text(indent: Int, level: Int) -> String {
        let pad = String(repeating: " ", count: indent * (level + 1)), end = String(repeating: " ", count: indent * level)
        switch self {
        case .null: return "null"
        case .int(let v): return String(v)
        case .string(let s): return jsonString(s, asciiOnly: true)
        case .array(let a):
            if a.isEmpty { return "[]" }
            return "[\n" + a.map { pad + $0.text(indent: indent, level: level + 1) }.joined(separator: ",\n") + "\n\(end)]"
        case .object(let o):
            if o.isEmpty { return "{}" }
            return "{\n" + o.map { pad + jsonString($0.0, asciiOnly: true) + ": " + $0.1.text(indent: indent, level: level + 1) }
                .joined(separator: ",\n") + "\n\(end)}"
        }
    }
}

/// A JSON string as Python's json.dumps writes it (`ensure_ascii` = `asciiOnly`).
nonisolated func jsonString(_ s: String, asciiOnly: Bool) -> String {
    var out = "\""
    func u(_ v: UInt16) -> String {
        let h = String(v, radix: 16)
        return "\\u" + String(repeating: "0", count: 4 - h.count) + h
    }
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case "\u{08}": out += "\\b"
        case "\u{0C}": out += "\\f"
        default:
            if scalar.value < 0x20 || (asciiOnly && scalar.value > 0x7e) {
                if asciiOnly && scalar.value == 0x7f {
                    out.unicodeScalars.append(scalar)
                } else {
                    for unit in String(scalar).utf16 { out += u(unit) }
                }
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}
