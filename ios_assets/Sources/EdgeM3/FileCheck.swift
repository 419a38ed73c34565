import Foundation
#if canImport(CryptoKit)
import CryptoKit
#endif

/// The bundle's files against manifest.json's `files` entries: size always, SHA-256 once per
/// file version (the 584.5 MB int8 model costs seconds to hash; see README "Integrity").
nonisolated public enum FileCheck {
    /// Lowercase hex SHA-256 of a file, streamed in 1 MiB chunks (no whole-file copy in memory).
    public static func sha256(of url: URL) throws -> String {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = StreamingSHA256()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            chunk.withUnsafeBytes { hasher.update($0) }
        }
        return hasher.hexDigest()
    }

    /// Throws when `url`'s size or SHA-256 differ from `entry`. With a `memo` folder, success is
    /// remembered there (keyed by hash, size and modification time), so later loads check the
    /// size only. Returns whether the file was hashed.
    @discardableResult
    public static func verify(_ url: URL, against entry: FileEntry, memo: URL? = nil) throws -> Bool {
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw EdgeM3Error("\(url.lastPathComponent): not found (listed in manifest.json); copy the bundle again",
                              kind: .corruptBundle)
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
        let size = (attributes[.size] as? NSNumber)?.int64Value ?? -1
        if size != entry.size {
            throw EdgeM3Error("\(url.lastPathComponent): \(size) bytes, manifest.json says \(entry.size); copy the bundle again",
                              kind: .corruptBundle)
        }
        let modified = Int64(((attributes[.modificationDate] as? Date) ?? .distantPast).timeIntervalSince1970)
        let marker = memo?.appendingPathComponent("edge_m3-verified-\(entry.sha256)-\(size)-\(modified)")
        if let marker, FileManager.default.fileExists(atPath: marker.path) { return false }
        let actual = try sha256(of: url)
        if actual != entry.sha256.lowercased() {
            throw EdgeM3Error("\(url.lastPathComponent): sha256 \(actual), manifest.json says \(entry.sha256); copy the bundle again",
                              kind: .corruptBundle)
        }
        if let marker, let memo {
            try? FileManager.default.createDirectory(at: memo, withIntermediateDirectories: true)
            _ = FileManager.default.createFile(atPath: marker.path, contents: Data())  // best effort: else the next load re-hashes
        }
        return true
    }
}

/// A UTF-8 text file's lines, split on "\n" only (a Swift Character would keep "\r\n" together),
/// as Python's `edge-m3 embed --texts` and the kits' command-line tools read them.
nonisolated public func textLines(ofFile path: String) throws -> [String] {
    guard let data = FileManager.default.contents(atPath: path) else { throw EdgeM3Error("\(path): not found") }
    guard String(data: data, encoding: .utf8) != nil else { throw EdgeM3Error("\(path): not valid UTF-8") }
    let bytes = [UInt8](data)
    if bytes.isEmpty { return [] }
    var lines = bytes.split(separator: 10, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    if bytes.last == 10 { lines.removeLast() }
    return lines
}

#if canImport(CryptoKit)
/// CryptoKit's SHA-256 (hardware-accelerated on Apple CPUs).
nonisolated struct StreamingSHA256 {
    private var hasher = CryptoKit.SHA256()

    mutating func update(_ bytes: UnsafeRawBufferPointer) { hasher.update(bufferPointer: bytes) }

    func hexDigest() -> String { hasher.finalize().map { hex($0) }.joined() }
}
#else
/// FIPS 180-4 SHA-256 for platforms without CryptoKit (Linux CI); checked against the standard's
/// test vectors and against manifest.json hashes written by Python's hashlib.
nonisolated struct StreamingSHA256 {
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19)
    private var pending = [UInt8]()  // < 64 bytes not yet hashed
    private var length: UInt64 = 0  // bytes seen

    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length &+= UInt64(bytes.count)
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { schedule in
            var offset = 0
            if !pending.isEmpty {
                let take = min(64 - pending.count, bytes.count)
                pending += bytes[0..<take]
                offset = take
                if pending.count < 64 { return }
                let block = pending
                block.withUnsafeBytes { compress($0, schedule) }
                pending.removeAll(keepingCapacity: true)
            }
            while offset + 64 <= bytes.count {
                compress(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + 64]), schedule)
                offset += 64
            }
            pending += bytes[offset...]
        }
    }

    func hexDigest() -> String {
        var copy = self
        let bits = length &* 8
        var tail: [UInt8] = [0x80] + [UInt8](repeating: 0, count: (119 - Int(length % 64)) % 64)
        tail += (0..<8).map { UInt8(truncatingIfNeeded: bits >> (56 - 8 * $0)) }
        tail.withUnsafeBytes { copy.update($0) }
        let s = copy.state
        return [s.0, s.1, s.2, s.3, s.4, s.5, s.6, s.7]
            .flatMap { w in (0..<4).map { UInt8(truncatingIfNeeded: w >> (24 - 8 * $0)) } }
            .map { hex($0) }.joined()
    }

    /// One 64-byte block into the state; `w` is the message schedule's scratch space.
    private mutating func compress(_ block: UnsafeRawBufferPointer, _ w: UnsafeMutableBufferPointer<UInt32>) {
        for i in 0..<16 { w[i] = block.loadUnaligned(fromByteOffset: 4 * i, as: UInt32.self).bigEndian }
        for i in 16..<64 {
            let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, h) = state
        StreamingSHA256.k.withUnsafeBufferPointer { k in
            for i in 0..<64 {
                let t1 = h &+ (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) &+ ((e & f) ^ (~e & g)) &+ k[i] &+ w[i]
                let t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) &+ ((a & b) ^ (a & c) ^ (b & c))
                (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
            }
        }
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d,
                 state.4 &+ e, state.5 &+ f, state.6 &+ g, state.7 &+ h)
    }
}

@inline(__always) nonisolated private func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { x >> n | x << (32 - n) }
#endif

nonisolated private func hex(_ byte: UInt8) -> String {
    let digits = Array("0123456789abcdef")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
}
