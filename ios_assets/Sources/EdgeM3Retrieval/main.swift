// The kit's Retrieval scores and EdgeM3Index search on the command line, driven by
// tests/test_kit_retrieval.py (the Kotlin twin: android_assets/jvm/RetrievalCheck.kt, same protocol).
//
//   edge-m3-retrieval score CASES
//       per pair, weights set and mode: "PAIR SET MODE HEX" (HEX: the float64 score's bits, or "error")
//   edge-m3-retrieval search INDEX QUERIES PLAN [--bundle DIR] [--scope passages|chunks]
//       per plan line and query: "LINE QUERY ROW:HEX ROW:HEX ..." (best first), or "LINE QUERY error";
//       with --scope, that search scope (passages: the default search) and "ROW:CHUNK:HEX" per hit
//   edge-m3-retrieval bench INDEX QUERIES K MODE[,MODE...] REPEATS
//       per mode: "MODE WALL:CPU WALL:CPU ..." seconds of one search each, wall clock and the
//       thread's CPU time (one thread; every query REPEATS times after one warm-up pass)
//   edge-m3-retrieval ops DIR OPS
//       EdgeM3WritableIndex in folder DIR driven by the op log OPS (tools/kit/retrieval_wire.py,
//       "op log"): one answer line per operation ("ok", "error KIND", "count N" (passages),
//       "contains true|false", "ids N" ID*N (logical row order), "hits N" (ROW ID CHUNK HEX64)*N)
//
// CASES and QUERIES are whitespace-separated tokens, every float as the hex of its bits (float32:
// 8 digits, float64: 16):
//   CASES   = "weights" K (HEX64 HEX64 HEX64)*K "pairs" N (VECTORS VECTORS)*N
//   QUERIES = "queries" N VECTORS*N
//   PLAN    = "plan" N (K MODE HEX64 HEX64 HEX64)*N    (K, mode, weights dense sparse colbert)
//   VECTORS = ("D" LEN HEX32*LEN | "D" "-") ("L" N (ID HEX32)*N | "L" "-") ("C" ROWS DIM HEX32*(ROWS*DIM) | "C" "-")
// Bad input: one line on stderr, exit 2.
import Dispatch
import EdgeM3
import Foundation
#if canImport(Glibc)
import Glibc
#endif

struct Tokens {
    private let t: [Substring]
    private var i = 0

    init(_ path: String) throws {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw EdgeM3Error("\(path): not found")
        }
        t = text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" })
    }

    mutating func next() throws -> Substring {
        guard i < t.count else { throw EdgeM3Error("input ends early") }
        i += 1
        return t[i - 1]
    }

    mutating func expect(_ word: String) throws {
        let got = try next()
        guard got == word else { throw EdgeM3Error("expected \"\(word)\", got \"\(got)\"") }
    }

    mutating func int() throws -> Int {
        guard let v = Int(try next()) else { throw EdgeM3Error("expected a number") }
        return v
    }

    mutating func f32() throws -> Float {
        guard let bits = UInt32(try next(), radix: 16) else { throw EdgeM3Error("expected 8 hex digits") }
        return Float(bitPattern: bits)
    }

    mutating func f64() throws -> Double {
        guard let bits = UInt64(try next(), radix: 16) else { throw EdgeM3Error("expected 16 hex digits") }
        return Double(bitPattern: bits)
    }

    mutating func absent() -> Bool {
        if i < t.count && t[i] == "-" {
            i += 1
            return true
        }
        return false
    }

    mutating func vectors() throws -> Retrieval.Vectors {
        try expect("D")
        var dense: [Float]?
        if !absent() { dense = try (0..<int()).map { _ in try f32() } }
        try expect("L")
        var lexical: Retrieval.Lexical?
        if !absent() {
            var ids: [Int32] = [], ws: [Float] = []
            for _ in 0..<(try int()) {
                ids.append(Int32(try int()))
                ws.append(try f32())
            }
            lexical = try Retrieval.Lexical(Dictionary(uniqueKeysWithValues: zip(ids.map(String.init), ws)))
        }
        try expect("C")
        var colbert: [[Float]]?
        if !absent() {
            let rows = try int(), dim = try int()
            colbert = try (0..<rows).map { _ in try (0..<dim).map { _ in try f32() } }
        }
        return Retrieval.Vectors(dense: dense, lexical: lexical, colbert: colbert)
    }
}

func hex(_ x: Double) -> String {
    let s = String(x.bitPattern, radix: 16)
    return String(repeating: "0", count: 16 - s.count) + s
}

func score(_ path: String) throws {
    var t = try Tokens(path)
    try t.expect("weights")
    let sets = try (0..<t.int()).map { _ in try (0..<3).map { _ in try t.f64() } }
    try t.expect("pairs")
    var out = ""
    for i in 0..<(try t.int()) {
        let q = try t.vectors(), p = try t.vectors()
        for (k, w) in sets.enumerated() {
            for mode in Retrieval.modes {
                let s = (try? Retrieval.score(q, p, mode: mode, weights: w)).map(hex) ?? "error"
                out += "\(i) \(k) \(mode) \(s)\n"
            }
        }
    }
    print(out, terminator: "")
}

func queries(_ path: String) throws -> [Retrieval.Vectors] {
    var t = try Tokens(path)
    try t.expect("queries")
    return try (0..<t.int()).map { _ in try t.vectors() }
}

/// The ScoreMode overloads of search (EdgeM3Options.swift) give `hits`, the string mode's answer, hit
/// for hit (`key`: row, chunk, score bits): with these weights, and, when the weights are the defaults
/// and the scope passages, with both left out (`run`'s weights nil). An unknown mode has no enum.
func sameByEnum<H>(_ hits: [H], mode: String, weights: [Double], chunks: Bool, key: (H) -> String,
                   _ run: (ScoreMode, [Double]?) throws -> [H]) throws {
    guard let m = ScoreMode(rawValue: mode) else { return }
    let defaults = !chunks && weights == Retrieval.defaultWeights
    for w in defaults ? [weights, nil] : [weights] {
        let other = try run(m, w).map(key)
        guard other == hits.map(key) else {
            fatalError("ScoreMode.\(m) (weights \(String(describing: w))) gave \(other), the string \"\(mode)\" \(hits.map(key))")
        }
    }
}

func search(_ argv: [String]) throws {
    var all = argv
    // --scope: the hits' chunk numbers printed, and passages or chunks searched
    var chunks: Bool?
    if let at = all.firstIndex(of: "--scope") {
        guard at + 1 < all.count, ["passages", "chunks"].contains(all[at + 1]) else { usage() }
        chunks = all[at + 1] == "chunks"
        all.removeSubrange(at...(at + 1))
    }
    let at = all.firstIndex(of: "--bundle")
    let a = at.map { Array(all[..<$0]) } ?? all
    guard a.count == 3, at == nil || at == all.count - 2 else { usage() }
    // The bundle's manifest.json files: name -> sha256, what an app holding the bundle passes.
    var bundleFiles: [String: String]?
    if let at {
        let url = URL(fileURLWithPath: all[at + 1]).appendingPathComponent(EdgeM3Contract.manifest)
        let manifest = try JSONDecoder().decode(Manifest.self, from: try Data(contentsOf: url))
        bundleFiles = manifest.files.mapValues { $0.sha256 }
    }
    let index = try EdgeM3Index(folder: URL(fileURLWithPath: a[0], isDirectory: true), bundleFiles: bundleFiles)
    let qs = try queries(a[1])
    var plan = try Tokens(a[2])
    try plan.expect("plan")
    var out = ""
    for j in 0..<(try plan.int()) {
        let k = try plan.int()
        let mode = String(try plan.next())
        let weights = try (0..<3).map { _ in try plan.f64() }
        for (i, q) in qs.enumerated() {
            out += "\(j) \(i)"
            do {
                let hits = try index.search(q, k: k, mode: mode, weights: weights, chunks: chunks ?? false)
                try sameByEnum(hits, mode: mode, weights: weights, chunks: chunks ?? false,
                               key: { "\($0.row):\($0.chunk):\(hex($0.score))" }) { m, w in
                    if let w { return try index.search(q, k: k, mode: m, weights: w, chunks: chunks ?? false) }
                    return try index.search(q, k: k, mode: m)
                }
                for h in hits {
                    out += chunks == nil ? " \(h.row):\(hex(h.score))" : " \(h.row):\(h.chunk):\(hex(h.score))"
                }
            } catch {
                out += " error"
            }
            out += "\n"
        }
    }
    print(out, terminator: "")
}

func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

/// This thread's CPU time in seconds: what an idle core would take, on a shared machine.
func threadCPU() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func bench(_ a: [String]) throws {
    let t0 = now()
    let index = try EdgeM3Index(folder: URL(fileURLWithPath: a[0], isDirectory: true), verifySHA256: false)
    print("open \(now() - t0) s, \(index.count) passages")
    let qs = try queries(a[1])
    guard let k = Int(a[2]), let repeats = Int(a[4]) else { throw EdgeM3Error("K, REPEATS: numbers") }
    for mode in a[3].split(separator: ",").map(String.init) {
        for q in qs { _ = try index.search(q, k: k, mode: mode) }  // warm-up: page cache
        var times = mode
        for _ in 0..<repeats {
            for q in qs {
                let c = threadCPU(), s = now()
                _ = try index.search(q, k: k, mode: mode)
                times += " \(now() - s):\(threadCPU() - c)"
            }
        }
        print(times)
    }
}

/// An op log's id token: "i" DECIMAL, or "s" HEX (the string's UTF-8 bytes; "s" alone: "").
func passageID(_ token: Substring) throws -> EdgeM3WritableIndex.PassageID {
    let body = token.dropFirst()
    if token.first == "i", let v = Int64(body) { return .int(v) }
    guard token.first == "s", body.count % 2 == 0 else { throw EdgeM3Error("bad id token \"\(token)\"") }
    var utf8: [UInt8] = []
    var i = body.startIndex
    while i < body.endIndex {
        let j = body.index(i, offsetBy: 2)
        guard let b = UInt8(body[i..<j], radix: 16) else { throw EdgeM3Error("bad id token \"\(token)\"") }
        utf8.append(b)
        i = j
    }
    guard let s = String(bytes: utf8, encoding: .utf8) else { throw EdgeM3Error("id token \"\(token)\": not UTF-8") }
    return .string(s)
}

func idToken(_ id: EdgeM3WritableIndex.PassageID) -> String {
    switch id {
    case .int(let v): return "i\(v)"
    case .string(let s): return "s" + s.utf8.map { String(format: "%02x", $0) }.joined()
    }
}

func ops(_ dir: String, _ path: String) throws {
    var t = try Tokens(path)
    try t.expect("ops")
    let folder = URL(fileURLWithPath: dir, isDirectory: true)
    var index: EdgeM3WritableIndex?
    func open() throws -> EdgeM3WritableIndex {
        index = nil  // the old connection closes first
        index = try EdgeM3WritableIndex(folder: folder)
        return index!
    }
    func current() throws -> EdgeM3WritableIndex {
        guard let index else { throw EdgeM3Error("no index open") }
        return index
    }
    // Other processes write the folder at once (retrieval_wire.CONCURRENT_ENV): a second search may
    // see their commits, so the ScoreMode overloads are not searched again.
    let concurrent = ProcessInfo.processInfo.environment["EDGE_M3_OPS_CONCURRENT"] != nil
    var out = ""
    for _ in 0..<(try t.int()) {
        let op = try t.next()
        // Read the operation's arguments first, so a refused one still consumes its tokens.
        var answer = "ok"
        do {
            switch op {
            case "create":
                let dim = try t.int()
                let dense = String(try t.next()), colbert = String(try t.next())
                index = nil
                index = try EdgeM3WritableIndex.create(folder: folder, dim: dim, dense: dense, colbert: colbert)
            case "open", "reopen": _ = try open()
            case "add", "update":
                let id = try passageID(try t.next())
                let n = try t.int()
                guard n >= 0 else { throw OpLogError.bad("\(op): \(n) chunks") }
                let chunks = try (0..<n).map { _ in try t.vectors() }  // none: refused by the index
                if op == "add" { try current().add(id, chunks: chunks) } else { try current().update(id, chunks: chunks) }
            case "remove":
                let id = try passageID(try t.next())
                try current().remove(id)
            case "remove_many":
                let n = try t.int()
                guard n >= 0 else { throw OpLogError.bad("\(op): \(n) ids") }
                let ids = try (0..<n).map { _ in try passageID(try t.next()) }
                try current().removeAll(ids)
            case "ids":
                let ids = try current().ids()
                answer = "ids \(ids.count)" + ids.map { " " + idToken($0) }.joined()
            case "contains":
                let id = try passageID(try t.next())
                answer = "contains \(try current().contains(id))"
            case "count": answer = "count \(try current().count)"
            case "compact": try current().compact()
            case "search":
                let k = try t.int()
                let mode = String(try t.next())
                let weights = try (0..<3).map { _ in try t.f64() }
                let scope = try t.next()
                guard scope == "passages" || scope == "chunks" else { throw OpLogError.bad("unknown scope \"\(scope)\"") }
                let q = try t.vectors()
                let hits = try current().search(q, k: k, mode: mode, weights: weights, chunks: scope == "chunks")
                if !concurrent {
                    try sameByEnum(hits, mode: mode, weights: weights, chunks: scope == "chunks",
                                   key: { "\($0.row):\(idToken($0.id)):\($0.chunk):\(hex($0.score))" }) { m, w in
                        if let w { return try current().search(q, k: k, mode: m, weights: w, chunks: scope == "chunks") }
                        return try current().search(q, k: k, mode: m)
                    }
                }
                answer = "hits \(hits.count)" + hits.map { " \($0.row) \(idToken($0.id)) \($0.chunk) \(hex($0.score))" }.joined()
            default: throw OpLogError.bad("unknown operation \"\(op)\"")
            }
        } catch let e as EdgeM3Error {
            answer = "error \(e.kind.rawValue)"
            if ProcessInfo.processInfo.environment["EDGE_M3_OPS_VERBOSE"] != nil {
                FileHandle.standardError.write("\(op): \(e.message)\n".data(using: .utf8)!)
            }
        }
        out += answer + "\n"
    }
    print(out, terminator: "")
}

enum OpLogError: Error { case bad(String) }

func usage() -> Never {
    FileHandle.standardError.write(
        "usage: edge-m3-retrieval score CASES | search INDEX QUERIES PLAN [--bundle DIR] [--scope passages|chunks] | bench INDEX QUERIES K MODE[,MODE...] REPEATS | ops DIR OPS\n"
            .data(using: .utf8)!)
    exit(2)
}

let args = Array(CommandLine.arguments.dropFirst())
do {
    switch args.first {
    case "score" where args.count == 2: try score(args[1])
    case "search": try search(Array(args.dropFirst()))
    case "bench" where args.count == 6: try bench(Array(args.dropFirst()))
    case "ops" where args.count == 3: try ops(args[1], args[2])
    default: usage()
    }
} catch {
    FileHandle.standardError.write("\(error)\n".data(using: .utf8)!)
    exit(2)
}
