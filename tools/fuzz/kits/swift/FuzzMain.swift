// libFuzzer's entry for the kit's targets (FuzzTargets.swift); build.sh compiles it with
// -sanitize=fuzzer,address. The target is EDGE_M3_FUZZ_TARGET. The contract: the reader accepts
// the input, or refuses it with one EdgeM3Error (a typed kind, a one-line non-empty message; of an
// index's files, indexTargets, the kind corruptIndex); anything else traps here, and a trap, an ASan
// report, a hang past -timeout or memory past -rss_limit_mb / -malloc_limit_mb is libFuzzer's finding.
import Foundation

nonisolated(unsafe) var fuzzName = ""
nonisolated(unsafe) var fuzzTarget: (([UInt8]) throws -> Void)? = nil
/// EDGE_M3_FUZZ_VERDICTS=1: one "verdict: accepted" or "verdict: refused KIND" line per input on
/// stderr (tests/test_fuzz_kits.py: every seed must be accepted, past the harness's rehash).
nonisolated(unsafe) var printVerdicts = false
/// Targets whose input is all an index's files: every refusal must be corrupt_index.
let indexTargets: Set<String> = ["index", "writable"]

@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> Int32 {
    if ProcessInfo.processInfo.environment["EDGE_M3_FUZZ_DIFF"] == "1" {  // tools/fuzz/kits/loop.py's reader
        DiffMain.main()
        exit(0)
    }
    fuzzName = ProcessInfo.processInfo.environment["EDGE_M3_FUZZ_TARGET"] ?? ""
    guard let t = fuzzTargets[fuzzName] else {
        FileHandle.standardError.write(Data("EDGE_M3_FUZZ_TARGET must be one of \(fuzzTargets.keys.sorted().joined(separator: ", "))\n".utf8))
        exit(2)
    }
    fuzzTarget = t
    printVerdicts = ProcessInfo.processInfo.environment["EDGE_M3_FUZZ_VERDICTS"] == "1"
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    do {
        try fuzzTarget!(bytes)
        if printVerdicts { FileHandle.standardError.write(Data("verdict: accepted\n".utf8)) }
    } catch let e as EdgeM3Error {
        if printVerdicts { FileHandle.standardError.write(Data("verdict: refused \(e.kind.rawValue)\n".utf8)) }
        if e.message.isEmpty || e.message.unicodeScalars.contains(where: { EdgeM3Contract.lineBreakEscapes[$0] != nil }) || EdgeM3ErrorKind(rawValue: e.kind.rawValue) == nil {
            fatalError("\(fuzzName): the refusal is not one line: \(e.message.prefix(300).debugDescription)")
        }
        if indexTargets.contains(fuzzName) && e.kind != .corruptIndex {
            fatalError("\(fuzzName): the refusal is not corrupt_index: \(e.kind.rawValue) \(e.message.prefix(300).debugDescription)")
        }
    } catch {
        fatalError("\(fuzzName): not an EdgeM3Error: \(type(of: error)): \(String(describing: error).prefix(300))")
    }
    return 0
}
