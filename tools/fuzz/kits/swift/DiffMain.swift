// The iOS kit's readers behind the protocol of android_assets/jvm/KitFuzz.kt, for the
// differential fuzzing of tools/fuzz/kits/loop.py: the fuzz executable with EDGE_M3_FUZZ_DIFF=1
// serves this loop instead of fuzzing (one build for both; ASan still watches). stdin: per
// input a line "TARGET LENGTH" then LENGTH bytes; stdout: one line per input, "accepted CONTENT"
// (the SentencePiece model's pieces, scores and charsmap, then the ids of the texts; an index's
// search answers; a writable index's counts and answers per passage and per chunk), "refused
// KIND MESSAGE" (an EdgeM3Error) or "violation ..." (any other error).
// A trap ends the process: the driver reports it with the input.
import Foundation

func hexBytes(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }

/// The model's canonical form (as KitFuzz.kt and loop.py write it), its SHA-256's first 16 hex digits.
func spmodelContent(_ data: [UInt8]) throws -> String {
    let m = try SentencePieceModel.parse(data, file: "sentencepiece.bpe.model")
    var s = ""
    for i in 0..<m.count {
        let cps = m.codePoints[m.starts[i]..<m.starts[i + 1]].map { String($0, radix: 16) }.joined(separator: ",")
        let score = m.scores[i].isNaN ? "nan" : String(format: "%08x", m.scores[i].bitPattern)
        s += "\(cps) \(score) \(m.types[i])\n"
    }
    s += "charsmap \(hexBytes(m.charsmap))\n"
    let digest = String(sha256Hex(Array(s.utf8)).prefix(16))
    let tok: any EdgeM3Tokenizer
    do {
        tok = try openTokenizer(spec: spmodelSpec) { _ in data }
    } catch is EdgeM3Error {
        return "\(digest) tokenizer-refused"
    }
    var runs: [String] = []
    for text in fuzzTexts {
        runs.append(try tok.encode(text, maxLength: nil).map(String.init).joined(separator: ","))
    }
    return "\(digest) " + runs.joined(separator: ";")
}

func idText(_ id: EdgeM3Index.PassageID) -> String {
    switch id {
    case .string(let s): return "s" + hexBytes(Array(s.utf8))
    case .int(let i): return "i\(i)"
    }
}

func indexContent(_ data: [UInt8]) throws -> String {
    let dir = try writeFolder(unpack(data), rehash: nil)  // loop.py rehashed it once for all three
    let idx = try EdgeM3Index(folder: dir)
    var tokens: [Int32] = []
    if let t = idx.sparseTokens { for i in 0..<min(3, idx.tokenCount) { tokens.append(t[i]) } }
    let q = try fuzzQuery(dim: idx.dim, tokens: tokens, value: 0.25)
    var parts: [String] = []
    for mode in EdgeM3Contract.scoreModes where idx.colbertStore != "none" || !mode.contains("colbert") {
        let hits = try idx.search(q, k: 3, mode: mode)
        let hs = hits.map { "\($0.row):\(idText(idx.ids[$0.row])):\(scoreBits($0.score))" }
        parts.append(([mode] + hs).joined(separator: " "))
    }
    return "\(idx.count) \(idx.dim) " + parts.joined(separator: ";")
}

func scoreBits(_ score: Double) -> String { score.isNaN ? "nan" : String(format: "%016llx", score.bitPattern) }

enum DiffMain {
    static func main() {
        let input = FileHandle.standardInput
        var buffer: [UInt8] = []
        func fill(_ n: Int) -> Bool {
            while buffer.count < n {
                let chunk = input.availableData
                if chunk.isEmpty { return false }
                buffer += chunk
            }
            return true
        }
        while true {
            var nl = buffer.firstIndex(of: 0x0A)
            while nl == nil {
                let chunk = input.availableData
                if chunk.isEmpty { return }
                buffer += chunk
                nl = buffer.firstIndex(of: 0x0A)
            }
            let header = String(decoding: buffer[..<nl!], as: UTF8.self).split(separator: " ")
            buffer.removeFirst(nl! + 1)
            guard header.count == 2, let n = Int(header[1]), fill(n) else { return }
            let data = Array(buffer[..<n])
            buffer.removeFirst(n)
            let target = String(header[0])
            var line: String
            do {
                switch target {
                case "spmodel": line = "accepted " + (try spmodelContent(data))
                case "index": line = "accepted " + (try indexContent(data))
                case "writable": line = "accepted " + (try writableAnswers(data, every: true, query: { try fuzzQuery(dim: $0, tokens: $1, value: 0.25) }))
                default:
                    guard let t = fuzzTargets[target] else { line = "violation unknown target \(target)"; break }
                    try t(data)
                    line = "accepted "
                }
            } catch let e as EdgeM3Error {
                line = e.message.isEmpty || e.message.unicodeScalars.contains(where: { EdgeM3Contract.lineBreakEscapes[$0] != nil })
                    ? "violation the refusal is not one line: \(e.message.prefix(300))"
                    : "refused \(e.kind.rawValue) \(e.message.prefix(200))"
            } catch {
                line = "violation \(type(of: error)): \(String(describing: error).prefix(300))"
            }
            let out = line.replacingOccurrences(of: "\n", with: "\\n").replacingOccurrences(of: "\r", with: "\\r") + "\n"
            FileHandle.standardOutput.write(Data(out.utf8))
        }
    }
}
