// The iOS kit's whole pipeline on a desktop, live on LiteRT's C API (LiteRtCRunner.swift).
//
//   edge-m3-embed [--bench] [--repeats N] [--threads N] --lib LIBLITERT BUNDLE TEXTS_FILE
//
// For each line of the UTF-8 file (split on "\n" only) one JSON object with the keys of
// `edge-m3 embed BUNDLE --texts FILE` (its JSON lines on stdout): input_ids, signature, dense_vecs, lexical_weights, colbert_vecs.
// `--bench`: one JSON line instead, {"open_to_first_ms", "p50_ms": {seq_len: ms}, "runs": {seq_len: n}}:
// the bundle, tokenizer and model opened and the first line embedded, then every line embedded
// `repeats` times (default 20) after 3 warm-ups, each full embed() call timed and grouped by the
// signature length it lands on. `--threads`: XNNPACK threads (default 1, as `edge-m3 embed`).
// tools/kit/kit_embed.sh wraps this. Bad input: one line on stderr, exit 2.
import Dispatch
import EdgeM3
import Foundation

struct UsageError: Error { let message: String }

let usage = "usage: edge-m3-embed [--bench] [--repeats N] [--threads N] --lib LIBLITERT BUNDLE TEXTS_FILE"

struct Options {
    var bench = false
    var repeats = 20
    var threads = 1
    var lib: String?
    var paths = [String]()

    init(_ argv: [String]) throws {
        var args = argv[...]
        func value(_ flag: String) throws -> String {
            guard let v = args.popFirst() else { throw UsageError(message: "\(flag) needs a value") }
            return v
        }
        func count(_ flag: String) throws -> Int {
            let v = try value(flag)
            guard let n = Int(v), n >= 1 else { throw UsageError(message: "\(flag) \(v): expected a whole number >= 1") }
            return n
        }
        while let a = args.popFirst() {
            switch a {
            case "--bench": bench = true
            case "--repeats": repeats = try count(a)
            case "--threads": threads = try count(a)
            case "--lib": lib = try value(a)
            default:
                if a.hasPrefix("--") { throw UsageError(message: "unknown option \(a); \(usage)") }
                paths.append(a)
            }
        }
        guard paths.count == 2 else { throw UsageError(message: usage) }
    }
}

/// JSON of one embedding with `edge-m3 embed`'s keys and order; floats as the float32's value
/// printed as a double (what Python's `float(np.float32(x))` prints), lexical keys in token order.
func json(_ e: Embedding) -> String {
    func floats(_ v: [Float]) -> String { "[" + v.map { "\(Double($0))" }.joined(separator: ", ") + "]" }
    func string(_ s: String) -> String {
        String(data: try! JSONSerialization.data(withJSONObject: [s], options: []), encoding: .utf8)!.dropFirst().dropLast().description
    }
    var parts = ["\"input_ids\": [" + e.inputIds.map(String.init).joined(separator: ", ") + "]",
                 "\"signature\": " + string(e.signature)]
    if let d = e.denseVecs { parts.append("\"\(EdgeM3Contract.denseVecs)\": " + floats(d)) }
    if let lex = e.lexicalWeights {
        var seen = Set<String>()
        let keys = e.inputIds.map(String.init).filter { lex[$0] != nil && seen.insert($0).inserted }
        parts.append("\"\(EdgeM3Contract.lexicalWeights)\": {" + keys.map { "\"\($0)\": \(Double(lex[$0]!))" }
            .joined(separator: ", ") + "}")
    }
    if let c = e.colbertVecs { parts.append("\"\(EdgeM3Contract.colbertVecs)\": [" + c.map(floats).joined(separator: ", ") + "]") }
    return "{" + parts.joined(separator: ", ") + "}"
}

func milliseconds(since t0: UInt64) -> Double {
    Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6
}

/// The middle value (the mean of the two middle ones for an even count), as Python's statistics.median.
func median(_ values: [Double]) -> Double {
    let s = values.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

func run(_ argv: [String]) throws {
    let opts = try Options(argv)
    guard let libPath = opts.lib else { throw UsageError(message: "--lib LIBLITERT is required (the ai-edge-litert wheel's libLiteRt)") }
    let (bundle, textsFile) = (opts.paths[0], opts.paths[1])
    var isDir: ObjCBool = false
    guard FileManager.default.fileExists(atPath: bundle + "/" + EdgeM3Contract.manifest, isDirectory: &isDir), !isDir.boolValue else {
        throw UsageError(message: "\(bundle): not a bundle (no manifest.json)")
    }
    let texts = try textLines(ofFile: textsFile)
    if texts.isEmpty { throw UsageError(message: "\(textsFile): no lines to embed") }
    let library = try LiteRtLibrary(path: libPath)
    let t0 = DispatchTime.now().uptimeNanoseconds
    let embedder = try EdgeM3Embedder(directory: URL(fileURLWithPath: bundle, isDirectory: true), liteRt: library,
                                      threads: opts.threads)
    let first = try embedder.embed(texts[0])
    let openToFirst = milliseconds(since: t0)
    if !opts.bench {
        var out = json(first) + "\n"
        for text in texts.dropFirst() { out += json(try embedder.embed(text)) + "\n" }
        FileHandle.standardOutput.write(out.data(using: .utf8)!)
        return
    }
    var times = [Int: [Double]]()
    for text in texts {
        for _ in 0..<3 { _ = try embedder.embed(text) }
        for _ in 0..<opts.repeats {
            let t = DispatchTime.now().uptimeNanoseconds
            let e = try embedder.embed(text)
            times[e.seqLen, default: []].append(milliseconds(since: t))
        }
    }
    let lengths = times.keys.sorted()
    let p50 = lengths.map { "\"\($0)\": \(median(times[$0]!))" }.joined(separator: ", ")
    let runs = lengths.map { "\"\($0)\": \(times[$0]!.count)" }.joined(separator: ", ")
    print("{\"open_to_first_ms\": \(openToFirst), \"p50_ms\": {\(p50)}, \"runs\": {\(runs)}, \"threads\": \(opts.threads)}")
}

do {
    try run(Array(CommandLine.arguments.dropFirst()))
} catch let exc as UsageError {
    FileHandle.standardError.write("kit_embed: \(exc.message)\n".data(using: .utf8)!)
    exit(2)
} catch {  // EdgeM3Error (its one line), or a file Foundation could not read
    FileHandle.standardError.write("kit_embed: \(error)\n".data(using: .utf8)!)
    exit(2)
}
