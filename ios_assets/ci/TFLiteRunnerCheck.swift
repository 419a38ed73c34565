// CI only: Sources/EdgeM3/TFLiteRunner.swift run on Linux against the TensorFlowLite stand-in
// (stubs/TensorFlowLite.swift, whose "model" is a real file's signatures as LiteRT reports them:
// $EDGE_M3_TFLITE_STANDIN_MODEL). Compiled with the kit's sources as an app target compiles them
// (tests/test_swift_ios_binding.py):
//
//   tflite-runner-check embed BUNDLE TEXT [off|memory|file:DIR]   one JSON line, `edge-m3 embed`'s keys
//   tflite-runner-check closed BUNDLE                              runs a closed runner
//
// A failure is one line on stderr, "error <kind>: <message>", exit 2.
import Foundation
import TensorFlowLiteC

@main
struct TFLiteRunnerCheck {
    static func main() {
        let args = Array(CommandLine.arguments.dropFirst())
        do {
            switch (args.first, args.count) {
            case ("embed", 3), ("embed", 4):
                let cache = weightCacheArgument(args.count == 4 ? args[3] : nil)
                let embedder = try EdgeM3Embedder(directory: URL(fileURLWithPath: args[1]), threads: 2,
                                                  weightCache: cache, checksumMemo: nil)
                let e = try embedder.embed(args[2])
                let xnn = EdgeM3StubXNNPackLastOptions()
                try printEmbedding(e, ["xnnpack_threads": Int(xnn.num_threads),
                                       "xnnpack_cache": xnn.weight_cache_file_path.map { String(cString: $0) } ?? ""])
            case ("closed", 2):
                let directory = URL(fileURLWithPath: args[1])
                let opened = try EdgeM3Embedder.openBundle(directory: directory, checksumMemo: nil)
                let runner = try TFLiteRunner(modelPath: opened.modelFile.path, weightCache: .off)
                let signature = opened.pipeline.model.signatures[0]
                let ids = [Int32](repeating: 0, count: signature.seqLen)
                runner.close()
                _ = try runner.run(signature, inputIds: ids, attentionMask: ids)
                print("ran")
            default:
                FileHandle.standardError.write(Data("usage: tflite-runner-check embed BUNDLE TEXT [off|memory|file:DIR] | closed BUNDLE\n".utf8))
                exit(2)
            }
        } catch {
            FileHandle.standardError.write(Data("error \(kind(of: error)): \(error)\n".utf8))
            exit(2)
        }
    }
}

/// The typed error's kind (EdgeM3ErrorKind), or the Swift type of another error.
func kind(of error: Error) -> String {
    (error as? EdgeM3Error).map { "\($0.kind)" } ?? "\(type(of: error))"
}
