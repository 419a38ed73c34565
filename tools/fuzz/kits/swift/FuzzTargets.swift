// Issue 38: the iOS kit's readers of untrusted files as fuzz targets. Compiled by build.sh together
// with the kit's sources (ios_assets/Sources/EdgeM3) into one module, never into the package's
// products. Each target takes one input's bytes and either returns (accepted, and what the reader
// returned works: the asserts below) or throws; FuzzMain.swift / DiffMain.swift judge the throw.
// The same targets, inputs and folder blobs as the Python ones (tools/fuzz/targets, harness.py).
import Foundation

/// What targets tokenize once a tokenizer is accepted (tools/fuzz/harness.py TEXTS).
let fuzzTexts = ["Hello wörld, ＡＢＣ ﬁ 123 <mask> [MASK] </s>", "日本語のテキスト 👍🏽 e\u{0301}",
                 String(repeating: "x", count: 120), ""]

/// A broken promise of an accepted reader: a contract violation (the harness traps on it).
struct FuzzAssert: Error, CustomStringConvertible {
    let description: String
}

func require(_ ok: Bool, _ what: @autoclosure () -> String) throws {
    if !ok { throw FuzzAssert(description: what()) }
}

/// The repository's tools/fuzz (seeds of the base files some targets swap one file into).
let fuzzRoot: URL = {
    if let r = ProcessInfo.processInfo.environment["EDGE_M3_FUZZ_DIR"] { return URL(fileURLWithPath: r) }
    return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}()

// ------------------------------------------------------------------ folder blobs (harness.pack)

/// harness.unpack: `\n==> NAME <==\n` then the bytes, per file; unsafe names dropped.
func unpack(_ data: [UInt8]) -> [(String, [UInt8])] {
    let mark = Array("\n==> ".utf8), end = Array(" <==\n".utf8)
    let b: [UInt8] = [0x0A] + data
    func find(_ pat: [UInt8], from: Int) -> Int? { firstIndex(of: pat, in: b, from: from) }
    var starts: [Int] = []
    var at = 0
    while let i = find(mark, from: at) { starts.append(i); at = i + mark.count }
    var files: [(String, [UInt8])] = []
    for (k, s) in starts.enumerated() {
        let chunk = Array(b[(s + mark.count)..<(k + 1 < starts.count ? starts[k + 1] : b.count)])
        guard let e = findIn(chunk, end), let name = String(bytes: chunk[..<e], encoding: .utf8) else { continue }
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        let ok = parts.count <= 2 && parts.allSatisfy { p in
            !p.isEmpty && p.count <= 100 && p != "." && p != ".." &&
                p.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "_.-".unicodeScalars.contains($0)) }
        }
        if ok {
            files.removeAll { $0.0 == name }
            files.append((name, Array(chunk[(e + end.count)...])))
        }
    }
    return files
}

private func findIn(_ b: [UInt8], _ pat: [UInt8]) -> Int? { firstIndex(of: pat, in: b, from: 0) }

/// The first `i >= from` where `b[i...]` starts with `pat`: libc's memchr and memcmp, outside the
/// coverage instrumentation (the harness's scan of a 40 KB folder blob on every input is not the
/// reader under test; instrumented, it was about 14% of the `bundle` target).
private func firstIndex(of pat: [UInt8], in b: [UInt8], from: Int) -> Int? {
    guard !pat.isEmpty, from >= 0, from + pat.count <= b.count else { return nil }
    return b.withUnsafeBytes { hay in
        pat.withUnsafeBytes { needle in
            let base = hay.baseAddress!, last = hay.count - needle.count  // the last start that fits
            var i = from
            while i <= last, let p = memchr(base + i, Int32(needle[0]), last - i + 1) {
                i = base.distance(to: UnsafeRawPointer(p))
                if memcmp(base + i, needle.baseAddress!, needle.count) == 0 { return i }
                i += 1
            }
            return nil
        }
    }
}

func baseFiles(_ kind: String, _ seed: String) -> [(String, [UInt8])] {
    let url = fuzzRoot.appendingPathComponent("seeds/\(kind)/\(seed)")
    guard let d = FileManager.default.contents(atPath: url.path) else { fatalError("\(url.path): missing seed") }
    return unpack([UInt8](d))
}

/// A fresh scratch folder `sub` (RAM-backed under /dev/shm when there) holding `files`, and
/// `manifest`'s `files` entries rewritten to their sha256 and size (harness.rehash: issue 38's
/// attacker edits a folder's files and its manifest together). An entry that already matches is
/// left as it is, and a changed one is edited in the input's own text when its old values occur
/// there once (`splicedEntry`): the manifest's mutations then reach the reader as they were made, and
/// Foundation's JSON writer (about 14% of the `bundle` target) runs only when that fails.
func writeFolder(_ files: [(String, [UInt8])], rehash manifest: String?, into sub: String = "in") throws -> URL {
    let root = scratchRoot.appendingPathComponent(sub, isDirectory: true)
    try clearScratch(root)
    var byName: [String: [UInt8]] = [:]
    for (name, data) in files { byName[name] = data }
    if let manifest, let raw = byName[manifest],
       var m = (try? JSONSerialization.jsonObject(with: Data(raw), options: [.fragmentsAllowed])) as? [String: Any],
       var entries = m["files"] as? [String: Any] {
        var text: [UInt8]? = raw  // nil once an edit could not be made in place
        var changed = false
        for (name, entry) in entries {
            guard var e = entry as? [String: Any], let data = byName[name] else { continue }
            let digest = sha256Hex(data)
            let oldSha = e["sha256"] as? String, oldSize = integerText(e["size"])
            if oldSha == digest, oldSize == String(data.count) { continue }
            if let t = text, let oldSha, let oldSize {
                text = splicedEntry(t, sha: oldSha, size: oldSize, to: digest, data.count)
            } else {
                text = nil
            }
            e["sha256"] = digest
            e["size"] = data.count
            entries[name] = e
            changed = true
        }
        m["files"] = entries
        if let text {
            byName[manifest] = text
        } else if changed, let out = try? JSONSerialization.data(withJSONObject: m) {
            byName[manifest] = [UInt8](out)
        }
    }
    var made: [String] = []  // what clearScratch removes before the next input, deepest first
    defer { scratchMade[root.path] = made.reversed() }
    for name in byName.keys.sorted(by: { $0.filter { $0 == "/" }.count > $1.filter { $0 == "/" }.count }) {
        let path = root.path + "/" + name
        if access(path, F_OK) == 0 { continue }  // a file and a folder of one name: the file is dropped
        if let slash = name.firstIndex(of: "/"), mkdir(root.path + "/" + name[..<slash], 0o755) == 0 {
            made.append(root.path + "/" + name[..<slash])
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw FuzzAssert(description: "scratch file \(path): errno \(errno)") }
        defer { close(fd) }
        made.append(path)
        let data = byName[name]!
        var done = 0
        while done < data.count {
            let n = data.withUnsafeBytes { write(fd, $0.baseAddress! + done, data.count - done) }
            guard n > 0 else { throw FuzzAssert(description: "scratch file \(path): errno \(errno)") }
            done += n
        }
    }
    return root
}

/// The files and folders writeFolder made in each scratch folder, removed before the next input
/// with unlink and rmdir: FileManager's removal and creation of the whole tree, path by URL, were
/// about 20% of the `index` target. What a reader left there itself (SQLite's journal) makes the
/// folder's rmdir fail, and FileManager then removes the rest.
nonisolated(unsafe) var scratchMade: [String: [String]] = [:]

func clearScratch(_ root: URL) throws {
    for path in scratchMade.removeValue(forKey: root.path) ?? [] where unlink(path) != 0 { rmdir(path) }
    if rmdir(root.path) != 0 && errno != ENOENT { try FileManager.default.removeItem(at: root) }
    guard mkdir(root.path, 0o755) == 0 else { throw FuzzAssert(description: "scratch folder \(root.path): errno \(errno)") }
}

/// A JSON integer's text, as the Python and Kotlin harnesses read a size (`type(x) is int`, a
/// Long): Foundation gives `true` and `1.0` as NSNumbers too, whose text is "1" and "1.0".
func integerText(_ v: Any?) -> String? {
    guard let n = v as? NSNumber, "qlisQLIS".contains(String(cString: n.objCType)) else { return nil }
    return n.stringValue
}

/// `raw` with one `files` entry's digest and size replaced in place: the old digest's one
/// occurrence (quoted), then the first `"size": N` after it before a `}` (N the old size, a whole
/// number); nil when either is not found so (the caller then writes the whole manifest).
func splicedEntry(_ raw: [UInt8], sha old: String, size oldSize: String, to digest: String, _ size: Int) -> [UInt8]? {
    let quoted = Array("\"\(old)\"".utf8)
    guard let i = firstIndex(of: quoted, in: raw, from: 0), firstIndex(of: quoted, in: raw, from: i + 1) == nil else { return nil }
    var out = raw
    out.replaceSubrange(i..<(i + quoted.count), with: Array("\"\(digest)\"".utf8))
    let key = Array("\"size\": \(oldSize)".utf8)
    let close = firstIndex(of: Array("}".utf8), in: out, from: i) ?? out.count
    var from = i
    while let j = firstIndex(of: key, in: out, from: from), j < close {
        let end = j + key.count
        if end == out.count || !"0123456789.eE".utf8.contains(out[end]) {
            out.replaceSubrange(j..<end, with: Array("\"size\": \(size)".utf8))
            return out
        }
        from = j + 1
    }
    return nil
}

let scratchRoot: URL = {
    let shm = "/dev/shm"
    let base = FileManager.default.fileExists(atPath: shm) ? shm : NSTemporaryDirectory()
    let url = URL(fileURLWithPath: base).appendingPathComponent("edge-m3-kit-fuzz-\(getpid())", isDirectory: true)
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    atexit { try? FileManager.default.removeItem(atPath: "/dev/shm/edge-m3-kit-fuzz-\(getpid())") }
    return url
}()

/// The last files hashed and their digests: most inputs change one file of a folder, so the
/// others' digests are found here by a memcmp instead of an instrumented SHA-256 each time.
nonisolated(unsafe) var digestMemo: [([UInt8], String)] = []

func sha256Hex(_ data: [UInt8]) -> String {
    for (bytes, hex) in digestMemo where bytes.count == data.count {
        if data.isEmpty || bytes.withUnsafeBytes({ a in data.withUnsafeBytes { b in memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 } }) {
            return hex
        }
    }
    var h = StreamingSHA256()
    data.withUnsafeBytes { h.update($0) }
    let hex = h.hexDigest()
    if digestMemo.count >= 32 { digestMemo.removeFirst() }
    digestMemo.append((data, hex))
    return hex
}

// ------------------------------------------------------------------ the targets

struct TokenizerEntry: Decodable { let tokenizer: TokenizerSpec }

/// Every accepted tokenizer must give ids inside its vocabulary, bos first and eos last.
func exercise(_ tok: any EdgeM3Tokenizer, _ spec: TokenizerSpec, pipeline: Pipeline? = nil) throws {
    for text in fuzzTexts {
        let ids = try tok.encode(text, maxLength: nil)
        try require(ids.first == spec.special.bos && ids.last == spec.special.eos, "bos/eos: \(ids.prefix(8))")
        try require(ids.allSatisfy { $0 >= 0 && $0 < spec.vocabSize }, "ids past vocab_size \(spec.vocabSize)")
        let cut = try tok.encode(text, maxLength: 5)
        try require(cut.count <= 5, "maxLength 5 gave \(cut.count) ids")
        if let pipeline {
            let enc = try pipeline.encode(text, tokenizer: tok)
            let inputs = try pipeline.modelInputs(for: enc)
            let rows = pipeline.vocab?.keptIds.count ?? spec.vocabSize
            try require(inputs.inputIds.allSatisfy { $0 >= 0 && Int($0) < rows }, "rows past the table (\(rows))")
        }
    }
}

/// `spmodel`: sentencepiece.bpe.model (SentencePieceModel's protobuf reader, then XlmrTokenizer).
func fuzzSpmodel(_ data: [UInt8]) throws {
    let m = try SentencePieceModel.parse(data, file: "sentencepiece.bpe.model")
    try require(m.starts.count == m.count + 1 && m.types.count == m.count && m.starts.last == m.codePoints.count, "model arrays")
    let spec = spmodelSpec
    let tok = try openTokenizer(spec: spec) { _ in data }
    try exercise(tok, spec)
}

let spmodelSpec: TokenizerSpec = {
    let files = baseFiles("bundle", "tiny")
    let raw = files.first { $0.0 == EdgeM3Contract.manifest }!.1
    return try! JSONDecoder().decode(TokenizerEntry.self, from: Data(raw)).tokenizer
}()

/// `manifest`: manifest.json alone (decodeJSON + the checks of Manifest's init), a round trip.
func fuzzManifest(_ data: [UInt8]) throws {
    let m = try decodeJSON(Manifest.self, from: Data(data), file: EdgeM3Contract.manifest)
    let again = try JSONDecoder().decode(Manifest.self, from: JSONEncoder().encode(m))
    try require(again == m, "round trip")
    if m.tokenizer.vocabMapFile == nil { _ = try Pipeline(manifest: m) }
}

/// `bundle`: a whole bundle folder opened as the embedder opens it (manifest, vocab_map.json,
/// tokenizer of its kind, the model file checked), golden.json read, every text encoded.
func fuzzBundle(_ data: [UInt8]) throws {
    try openBundle(unpack(data))
}

func openBundle(_ files: [(String, [UInt8])]) throws {
    let dir = try writeFolder(files, rehash: EdgeM3Contract.manifest)
    let b = try EdgeM3Embedder.openBundle(directory: dir, checksumMemo: nil)
    try exercise(b.tokenizer, b.pipeline.manifest.tokenizer, pipeline: b.pipeline)
    let golden = dir.appendingPathComponent(EdgeM3Contract.golden)
    if FileManager.default.fileExists(atPath: golden.path) {
        let g = try Golden(contentsOf: golden)
        for c in g.cases { _ = try b.pipeline.encode(ids: c.expected.inputIds) }
    }
}

/// A committed bundle seed opened once as the embedder opens it (`openBundle`'s steps, its
/// model file checked), for the targets that fuzz one file of it: the other files never change,
/// so each input goes through that one file's reader alone, as the kit reads it at open. The
/// whole folder, every file at once, is the `bundle` target's.
struct OpenedBase: @unchecked Sendable {
    let pipeline: Pipeline
    let tokenizer: any EdgeM3Tokenizer

    init(_ seed: String) {
        let dir = try! writeFolder(baseFiles("bundle", seed), rehash: EdgeM3Contract.manifest, into: "base-\(seed)")
        let b = try! EdgeM3Embedder.openBundle(directory: dir, checksumMemo: nil)
        (pipeline, tokenizer) = (b.pipeline, b.tokenizer)
    }

    var spec: TokenizerSpec { pipeline.manifest.tokenizer }
}

let trimmedBase = OpenedBase("tiny-trimmed")
let wordpieceBase = OpenedBase("tiny-wordpiece")

/// `data` as the file `name` of a fresh scratch folder: the readers below take a URL.
func scratchFile(_ name: String, _ data: [UInt8]) throws -> URL {
    try writeFolder([(name, data)], rehash: nil).appendingPathComponent(name)
}

/// `golden`: golden.json of the committed tiny trimmed bundle (the tests' strict reader), every
/// case's ids then fitted to the bundle's signatures.
func fuzzGolden(_ data: [UInt8]) throws {
    let g = try Golden(contentsOf: scratchFile(EdgeM3Contract.golden, data))
    for c in g.cases { _ = try trimmedBase.pipeline.encode(ids: c.expected.inputIds) }
}

/// `vocab_map`: vocab_map.json of the committed tiny trimmed bundle, read as Pipeline(directory:)
/// reads it (VocabMap against the manifest's tokenizer, then the pipeline), then every text's rows.
func fuzzVocabMap(_ data: [UInt8]) throws {
    let spec = trimmedBase.spec
    let vocab = try VocabMap(contentsOf: scratchFile(spec.vocabMapFile ?? EdgeM3Contract.vocabMap, data), tokenizer: spec)
    try exercise(trimmedBase.tokenizer, spec, pipeline: Pipeline(manifest: trimmedBase.pipeline.manifest, vocab: vocab))
}

/// `wordpiece`: vocab.txt of the committed tiny WordPiece bundle, read as openTokenizer reads a
/// bundle's tokenizer file, then every text through it and the bundle's pipeline.
func fuzzWordpiece(_ data: [UInt8]) throws {
    let spec = wordpieceBase.spec
    try exercise(openTokenizer(spec: spec) { _ in data }, spec, pipeline: wordpieceBase.pipeline)
}

/// `bpe`: a byte-level BPE folder (manifest.json's tokenizer entry and bpe.json).
func fuzzBpe(_ data: [UInt8]) throws {
    let files = unpack(data)
    guard let raw = files.first(where: { $0.0 == EdgeM3Contract.manifest })?.1 else {
        throw EdgeM3Error("manifest.json: missing")
    }
    let spec = try decodeJSON(TokenizerEntry.self, from: Data(raw), file: EdgeM3Contract.manifest).tokenizer
    let tok = try openTokenizer(spec: spec) { name in
        guard let f = files.first(where: { $0.0 == name }) else { throw EdgeM3Error("\(name): not found") }
        return f.1
    }
    try exercise(tok, spec)
}

/// A query of width `dim` touching the index's first tokens (as tools/fuzz/targets/index.py): its
/// vectors `value` everywhere (1/sqrt(dim) unless given; the differential's is 0.25, as loop.py's).
func fuzzQuery(dim: Int, tokens: [Int32], value: Float? = nil) throws -> Retrieval.Vectors {
    let x = value ?? Float(1.0 / Double(dim).squareRoot())
    var lex = [String: Float]()
    for t in tokens { lex[String(t)] = 0.5 }
    lex["7"] = 0.25
    return Retrieval.Vectors(dense: Array(repeating: x, count: dim), lexical: try Retrieval.Lexical(lex),
                             colbert: Array(repeating: Array(repeating: x, count: dim), count: 2))
}

/// `index`: an index folder (EdgeM3Index: index.json, ids.json, the memory-mapped arrays), its
/// manifest's hashes rewritten to match, then every search mode it supports.
func fuzzIndex(_ data: [UInt8]) throws {
    let dir = try writeFolder(unpack(data), rehash: EdgeM3Contract.indexManifest)
    let idx = try EdgeM3Index(folder: dir)
    try require(idx.ids.count == idx.count, "ids")
    var tokens: [Int32] = []
    if let t = idx.sparseTokens { for i in 0..<min(3, idx.tokenCount) { tokens.append(t[i]) } }
    let q = try fuzzQuery(dim: idx.dim, tokens: tokens)
    for mode in EdgeM3Contract.scoreModes where idx.colbertStore != "none" || !mode.contains("colbert") {
        let hits = try idx.search(q, k: 3, mode: mode)
        try require(hits.count <= min(3, idx.count), "\(mode): \(hits.count) hits")
        try require(hits.allSatisfy { $0.row >= 0 && $0.row < idx.count }, "\(mode): row out of range")
    }
}

/// `writable`: a writable index's index.sqlite (EdgeM3WritableIndex: quick_check, the meta, the
/// passages' blobs), then every search mode its stores support, per passage and per chunk, each
/// checked; the answers in the differential's form (DiffMain.swift, loop.py, KitFuzz.kt): the
/// passage and row counts, the width, then "MODE[/chunks] row:id:chunk:scorebits ..." joined by ";".
/// The top 3, or with `every` (the differential) k = the row count: every passage and chunk.
func writableAnswers(_ data: [UInt8], every: Bool = false, query: (Int, [Int32]) throws -> Retrieval.Vectors) throws -> String {
    let dir = try writeFolder([(EdgeM3Contract.indexDb, data)], rehash: nil)
    let idx = try EdgeM3WritableIndex(folder: dir)
    let n = try idx.count, rows = try idx.rows  // passages, and their chunks' rows
    let q = try query(idx.dim, [5, 6, 9])
    let k = every ? max(rows, 1) : 3
    var parts: [String] = []
    for mode in EdgeM3Contract.scoreModes where idx.colbertStore != "none" || !mode.contains("colbert") {
        for chunks in [false, true] {
            let hits = try idx.search(q, k: k, mode: mode, chunks: chunks)
            try require(hits.count <= min(k, chunks ? rows : n), "\(mode): \(hits.count) hits")
            try require(hits.allSatisfy { $0.row >= 0 && $0.row < rows }, "\(mode): row out of range")
            try require(chunks || Set(hits.map(\.id)).count == hits.count, "\(mode): a passage twice")
            let hs = hits.map { "\($0.row):\(idText($0.id)):\($0.chunk):\(scoreBits($0.score))" }
            parts.append(([chunks ? mode + "/chunks" : mode] + hs).joined(separator: " "))
        }
    }
    return "\(n) \(rows) \(idx.dim) " + parts.joined(separator: ";")
}

func fuzzWritable(_ data: [UInt8]) throws {
    _ = try writableAnswers(data, query: { try fuzzQuery(dim: $0, tokens: $1) })
}

let fuzzTargets: [String: @Sendable ([UInt8]) throws -> Void] = [
    "spmodel": fuzzSpmodel, "manifest": fuzzManifest, "bundle": fuzzBundle, "golden": fuzzGolden,
    "vocab_map": fuzzVocabMap, "wordpiece": fuzzWordpiece, "bpe": fuzzBpe, "index": fuzzIndex,
    "writable": fuzzWritable,
]
