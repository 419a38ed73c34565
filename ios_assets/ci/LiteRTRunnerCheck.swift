// CI only: Sources/EdgeM3/LiteRTRunner.swift run on Linux against the LiteRT stand-in
// (stubs/LiteRT.swift, whose "model" is a real file's signatures as LiteRT reports them:
// $EDGE_M3_LITERT_STANDIN_MODEL; failures on demand: $EDGE_M3_LITERT_STANDIN_FAIL). Compiled with
// the kit's sources as an app target compiles them (tests/test_swift_litert_runner.py):
//
//   litert-runner-check embed BUNDLE TEXT [off|memory|file:DIR] [cpu|gpu]   one JSON line, `edge-m3 embed`'s keys
//   litert-runner-check closed BUNDLE                                       runs a closed runner
//   litert-runner-check cancelled BUNDLE TEXT                               embeds from a cancelled Task
//   litert-runner-check cancel-in-call BUNDLE TEXT                          cancels the Task inside the model call
//
// `embed` goes through `EdgeM3Embedder(directory:)` where TensorFlowLite is not linked, else
// through `EdgeM3Embedder(directory:runtime: LiteRTRunner.self)`. A failure is one line on
// stderr, "error <kind>: <message>", exit 2.
import Foundation
import LiteRT

@main
struct LiteRTRunnerCheck {
    static func main() async {
        let args = Array(CommandLine.arguments.dropFirst())
        do {
            switch (args.first, args.count) {
            case ("embed", 3...5):
                let cache = weightCacheArgument(args.count >= 4 ? args[3] : nil)
                let accelerator: EdgeM3Accelerator = args.count == 5 && args[4] == "gpu" ? .gpu : .cpu
                let directory = URL(fileURLWithPath: args[1])
                #if canImport(TensorFlowLite)
                let embedder = try EdgeM3Embedder(directory: directory, runtime: LiteRTRunner.self, threads: 2,
                                                  weightCache: cache, accelerator: accelerator, checksumMemo: nil)
                #else
                let embedder = accelerator == .cpu
                    ? try EdgeM3Embedder(directory: directory, threads: 2, weightCache: cache, checksumMemo: nil)
                    : try EdgeM3Embedder(directory: directory, runtime: LiteRTRunner.self, threads: 2,
                                         weightCache: cache, accelerator: accelerator, checksumMemo: nil)
                #endif
                let e = try await embedder.embed(args[2])  // the async path: the embedder's queue
                try printEmbedding(e, ["compiled_with": standInLastCompileOptions()])
            case ("closed", 2):
                let opened = try EdgeM3Embedder.openBundle(directory: URL(fileURLWithPath: args[1]), checksumMemo: nil)
                let runner = try LiteRTRunner(modelPath: opened.modelFile.path, weightCache: .off)
                let signature = opened.pipeline.model.signatures[0]
                let ids = [Int32](repeating: 0, count: signature.seqLen)
                runner.close()
                _ = try runner.run(signature, inputIds: ids, attentionMask: ids)
                print("ran")
            case ("cancelled", 3):
                let embedder = try EdgeM3Embedder(directory: URL(fileURLWithPath: args[1]), runtime: LiteRTRunner.self,
                                                  weightCache: .off, checksumMemo: nil)
                let text = args[2]
                let task = Task {
                    withUnsafeCurrentTask { $0?.cancel() }  // cancelled before the embed starts: no race
                    return try await embedder.embed([text, text])
                }
                _ = try await task.value
                print("ran")
            case ("cancel-in-call", 3):
                // The Task is cancelled after the embedder's check before the call and before LiteRT
                // invokes the model: only LiteRT's cancellation function can stop it there.
                let opened = try EdgeM3Embedder.openBundle(directory: URL(fileURLWithPath: args[1]), checksumMemo: nil)
                let holding = HoldingRunner(try LiteRTRunner(modelPath: opened.modelFile.path, weightCache: .off))
                let embedder = EdgeM3Embedder(pipeline: opened.pipeline, tokenizer: opened.tokenizer, runner: holding)
                let text = args[2]
                let task = Task.detached { try await embedder.embed([text]) }
                holding.entered.wait()
                task.cancel()
                holding.release.signal()
                _ = try await task.value
                print("ran")
            default:
                FileHandle.standardError.write(Data(("usage: litert-runner-check embed BUNDLE TEXT [off|memory|file:DIR] [cpu|gpu]"
                                                     + " | closed BUNDLE | cancelled BUNDLE TEXT | cancel-in-call BUNDLE TEXT\n").utf8))
                exit(2)
            }
        } catch {
            FileHandle.standardError.write(Data("error \((error as? EdgeM3Error).map { "\($0.kind)" } ?? "\(type(of: error))"): \(error)\n".utf8))
            exit(2)
        }
    }
}

/// LiteRTRunner behind a gate: the cancellable call signals `entered` and waits for `release`
/// before it goes on to LiteRT, as a long model call would be under way.
nonisolated final class HoldingRunner: ModelRunner, @unchecked Sendable {  // `real` only on the embedder's queue
    private let real: LiteRTRunner
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)

    init(_ real: LiteRTRunner) { self.real = real }

    func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        try real.run(signature, inputIds: inputIds, attentionMask: attentionMask)
    }

    func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32],
             isCancelled: @escaping @Sendable () -> Bool) throws -> RawOutputs {
        entered.signal()
        release.wait()
        return try real.run(signature, inputIds: inputIds, attentionMask: attentionMask, isCancelled: isCancelled)
    }

    func close() { real.close() }
}
