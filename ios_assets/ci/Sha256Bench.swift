// Measures FileCheck's SHA-256 (the kit's own on Linux, CryptoKit on Apple platforms) on a
// large file, optimised as in an app's release build. Not part of the package:
//
//   swiftc -O -parse-as-library ios_assets/Sources/EdgeM3/*.swift ios_assets/Sources/EdgeM3/Generated/*.swift \
//     ios_assets/ci/Sha256Bench.swift -o /tmp/sha256bench
//   /tmp/sha256bench <file>
//
// Prints "sha256 <hex> <bytes> bytes <seconds> s <MB/s> MB/s" (MB = 10^6 bytes).
import Foundation

@main
enum Sha256Bench {
    static func main() throws {
        guard CommandLine.arguments.count == 2 else {
            FileHandle.standardError.write(Data("usage: sha256bench <file>\n".utf8))
            exit(2)
        }
        let url = URL(fileURLWithPath: CommandLine.arguments[1])
        let start = DispatchTime.now().uptimeNanoseconds
        let hex = try FileCheck.sha256(of: url)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let bytes = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.doubleValue ?? 0
        print("sha256 \(hex) \(Int(bytes)) bytes \(String(format: "%.3f", seconds)) s \(String(format: "%.0f", bytes / 1e6 / seconds)) MB/s")
    }
}
