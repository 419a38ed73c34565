// The kit's tokenizer of the bundle's kind (EdgeM3Tokenizer) on a bundle, for CI and by hand (the Swift twin of android_assets/jvm/KitTokenize.kt).
//
//   edge-m3-tokenize BUNDLE TEXTS_FILE [--max-length N]
//       one JSON list of ids (the bundle's tokenizer kind) per line of the UTF-8 file (lines split on "\n" only)
//   edge-m3-tokenize --units BUNDLE FILE      lines "MAX HEX": MAX "-" or a length, HEX the text as
//       UTF-16 code units (4 hex digits each, lone surrogates allowed); prints the ids or
//       "error: <message>" per line (tests/test_kit_tokenizer.py)
//   edge-m3-tokenize --chunks BUNDLE FILE     lines "L OVERLAP HEX": L the largest signature length,
//       OVERLAP "-" (the default) or a number, HEX as --units; prints the text's chunks
//       (encodeChunks) as one JSON list of id lists, or "error: <message>", per line
//   edge-m3-tokenize --bench BUNDLE TEXTS_FILE  load time, then texts/s single-threaded
//
// BUNDLE is a directory with manifest.json (its "tokenizer" entry is what is read) and the model
// file it names. tools/kit/kit_tokenize.sh wraps this. Bad input: one line on stderr, exit 2.
import Dispatch
import EdgeM3
import Foundation

struct UsageError: Error { let message: String }

func readFile(_ path: String) throws -> Data {
    guard let data = FileManager.default.contents(atPath: path) else { throw UsageError(message: "\(path): not found") }
    return data
}

/// The manifest's tokenizer entry alone (the tests' vocabulary folders hold nothing else).
struct TokenizerEntry: Decodable { let tokenizer: TokenizerSpec }

func loadTokenizer(_ dir: String) throws -> any EdgeM3Tokenizer {
    let folder = URL(fileURLWithPath: dir, isDirectory: true)
    let manifestPath = folder.appendingPathComponent(EdgeM3Contract.manifest).path
    guard FileManager.default.fileExists(atPath: manifestPath) else {
        throw UsageError(message: "\(dir): not a bundle (no manifest.json)")
    }
    let spec: TokenizerSpec
    do {
        spec = try JSONDecoder().decode(TokenizerEntry.self, from: try readFile(manifestPath)).tokenizer
    } catch let error as DecodingError {
        throw UsageError(message: "\(manifestPath): bad tokenizer entry (\(error))")
    }
    let tokenizer = try openTokenizer(directory: folder, spec: spec)
    // A trimmed bundle's map is checked as the app checks it; the ids printed stay the original ones.
    if let name = spec.vocabMapFile {
        _ = try VocabMap(contentsOf: folder.appendingPathComponent(name), tokenizer: spec)
    }
    return tokenizer
}

func json(_ ids: [Int]) -> String {
    return "[" + ids.map(String.init).joined(separator: ", ") + "]"
}

func units(_ line: String, _ where_: String) throws -> (Int?, [UInt16]) {
    let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, parts[1].utf8.count % 4 == 0 else { throw UsageError(message: "\(where_): expected \"MAX HEX\"") }
    let hex = Array(parts[1].utf8)
    var out: [UInt16] = []
    var i = 0
    while i < hex.count {
        guard let u = UInt16(String(decoding: hex[i..<(i + 4)], as: UTF8.self), radix: 16) else {
            throw UsageError(message: "\(where_): bad hex")
        }
        out.append(u)
        i += 4
    }
    return (parts[0] == "-" ? nil : Int(parts[0]), out)
}

func seconds(since t0: UInt64) -> Double {
    return Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
}

func bench(_ tok: any EdgeM3Tokenizer, _ texts: [String], _ maxLength: Int?) throws {
    if texts.isEmpty { throw UsageError(message: "no texts to time") }
    var best = 0.0, tokens = 0
    let rounds = 7
    for round in 0..<rounds {  // the first two rounds warm caches up and are not counted
        let t0 = DispatchTime.now().uptimeNanoseconds
        var n = 0
        for t in texts { n += try tok.encode(t, maxLength: maxLength).count }
        let rate = Double(texts.count) / seconds(since: t0)
        if round >= 2 && rate > best { best = rate; tokens = n }
    }
    print(String(format: "texts: %d, tokens per text: %.1f", texts.count, Double(tokens) / Double(texts.count)))
    print(String(format: "best of %d rounds after a warm-up: %.0f texts/s (%.0f tokens/s), 1 thread",
                 rounds - 2, best, best * Double(tokens) / Double(texts.count)))
}

func run(_ argv: [String]) throws {
    let usage = UsageError(message: "usage: edge-m3-tokenize [--units|--chunks|--bench] BUNDLE FILE [--max-length N]")
    var rest = argv
    let mode = rest.first.map { $0.hasPrefix("--") } == true ? rest.removeFirst() : ""
    var maxLength: Int? = nil
    if let at = rest.firstIndex(of: "--max-length") {
        guard at + 1 < rest.count, let m = Int(rest[at + 1]) else { throw usage }
        maxLength = m
        rest.removeSubrange(at...(at + 1))
    }
    guard rest.count == 2, ["", "--units", "--chunks", "--bench"].contains(mode) else { throw usage }
    let t0 = DispatchTime.now().uptimeNanoseconds
    let tok = try loadTokenizer(rest[0])
    let loadS = seconds(since: t0)
    let lines = try textLines(ofFile: rest[1])
    var out = ""
    switch mode {
    case "--bench":
        var again = 0.0
        for _ in 0..<3 {
            let t1 = DispatchTime.now().uptimeNanoseconds
            _ = try loadTokenizer(rest[0])
            again = seconds(since: t1)
        }
        print(String(format: "load: %.0f ms first, %.0f ms on the third reload", loadS * 1000, again * 1000))
        try bench(tok, lines, maxLength)
        return
    case "--units":
        for (i, line) in lines.enumerated() {
            let (max, text) = try units(line, "\(rest[1]):\(i + 1)")
            do {
                out += json(try tok.encode(utf16: text, maxLength: max)) + "\n"
            } catch let exc as EdgeM3Error {
                out += "error: \(exc.message)\n"
            }
        }
    case "--chunks":
        for (i, line) in lines.enumerated() {
            let at = "\(rest[1]):\(i + 1)"
            let parts = line.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, let l = Int(parts[0]) else { throw UsageError(message: "\(at): expected \"L OVERLAP HEX\"") }
            let (overlap, text) = try units(String(parts[1]), at)
            do {
                let chunks = try tok.encodeChunks(utf16: text, maxLength: l, overlap: overlap)
                out += "[" + chunks.map(json).joined(separator: ", ") + "]\n"
            } catch let exc as EdgeM3Error {
                out += "error: \(exc.message)\n"
            }
        }
    default:
        for line in lines {
            do {
                out += json(try tok.encode(line, maxLength: maxLength)) + "\n"
            } catch let exc as EdgeM3Error {
                throw UsageError(message: exc.message)
            }
        }
    }
    FileHandle.standardOutput.write(out.data(using: .utf8)!)
}

do {
    try run(Array(CommandLine.arguments.dropFirst()))
} catch let exc as UsageError {
    FileHandle.standardError.write("kit_tokenize: \(exc.message)\n".data(using: .utf8)!)
    exit(2)
} catch {  // EdgeM3Error (its message), or a file Foundation could not read
    FileHandle.standardError.write("kit_tokenize: \(error)\n".data(using: .utf8)!)
    exit(2)
}
