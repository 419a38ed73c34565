import Foundation

// The runner interface and the tensor IO every runner shares: which model tensor is which
// manifest name, the checks that the model file's signatures are the manifest's, the int32
// inputs in the model's order and the float32 outputs reshaped. The runners themselves
// (LiteRtCRunner.swift on a desktop, TFLiteRunner.swift or LiteRTRunner.swift on a phone) only move bytes in and out,
// so what the desktop runs live in CI is what the phone binding relies on.
// The Kotlin kit's ModelRunner.kt mirrors this file.

/// Runs one signature on `[1, L]` int32 ids and mask (a model runtime, or a replay in tests).
nonisolated public protocol ModelRunner {
    func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs
    /// The same, stoppable inside the model call where the runtime can stop one: `isCancelled` is
    /// asked while the model runs (LiteRTRunner: LiteRT's cancellation function), and true ends the
    /// call with `.cancelled`. `EdgeM3Embedder`'s `async` calls pass their Task's cancellation.
    /// Default: `run` (a TF Lite invocation cannot be stopped; the embedder checks before each call).
    func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32],
             isCancelled: @escaping @Sendable () -> Bool) throws -> RawOutputs
    /// Releases the model now; a later `run` throws `.runnerClosed`. `EdgeM3Embedder.close()` calls
    /// it once, never during a `run`. Default: nothing (a replay holds no model).
    func close()
}

nonisolated extension ModelRunner {
    public func close() {}

    public func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32],
                    isCancelled: @escaping @Sendable () -> Bool) throws -> RawOutputs {
        try run(signature, inputIds: inputIds, attentionMask: attentionMask)
    }
}

/// A signature's outputs without the batch axis: `[H]`, `[L]`, `[L-1][H]`; nil for a head not exported.
nonisolated public struct RawOutputs: Hashable, Sendable {
    public var denseVecs: [Float]?
    public var sparseWeights: [Float]?
    public var colbertVecs: [[Float]]?

    public init(denseVecs: [Float]?, sparseWeights: [Float]?, colbertVecs: [[Float]]?) {
        self.denseVecs = denseVecs
        self.sparseWeights = sparseWeights
        self.colbertVecs = colbertVecs
    }
}

/// A manifest signature bound to the model file's own tensors of that signature. Made once per
/// signature by a runner; `init` refuses a model whose signature differs from the manifest (a
/// missing or extra input, a missing output, another shape or type) with one line naming both.
nonisolated public struct SignatureBinding: Hashable, Sendable {
    public let signature: Signature
    /// The model's inputs and outputs as the runtime reports them from the file (dtype: the
    /// manifest's names, "int32", "float32"), in the model's order (the order a runtime takes buffers in).
    public let inputs: [TensorSpec]
    public let outputs: [TensorSpec]

    public static let inputNames: Set<String> = [EdgeM3Contract.inputIds, EdgeM3Contract.attentionMask]
    public static let outputNames = [EdgeM3Contract.denseVecs, EdgeM3Contract.sparseWeights, EdgeM3Contract.colbertVecs]

    /// `file`: the model file, for the message.
    public init(_ signature: Signature, inputs: [TensorSpec], outputs: [TensorSpec], file: String) throws {
        func differs(_ what: String) -> EdgeM3Error {
            EdgeM3Error("\(file): signature \(signature.name) differs from manifest.json: \(what)", kind: .signatureMismatch)
        }
        let want = [1, signature.seqLen]
        if Set(inputs.map(\.name)) != Self.inputNames || inputs.count != 2 {
            throw differs("inputs \(inputs.map(\.name)), expected \(Self.inputNames.sorted())")
        }
        for t in inputs where t.shape != want || t.dtype != "int32" {
            throw differs("input \(t.name) is \(t.dtype) \(t.shape), expected int32 \(want)")
        }
        for spec in signature.outputs {
            guard let t = outputs.first(where: { $0.name == spec.name }) else {
                throw differs("no output \(spec.name) (has \(outputs.map(\.name)))")
            }
            if t.shape != spec.shape || t.dtype != spec.dtype {
                throw differs("output \(t.name) is \(t.dtype) \(t.shape), manifest says \(spec.dtype) \(spec.shape)")
            }
            if t.dtype != "float32" { throw differs("output \(t.name) is \(t.dtype), the kit reads float32") }
        }
        if let extra = signature.outputs.first(where: { !Self.outputNames.contains($0.name) }) {
            throw differs("unknown output \(extra.name) in the manifest")
        }
        self.signature = signature
        self.inputs = inputs
        self.outputs = outputs
    }

    /// The ids and the mask in the model's input order, each checked to be `[1, L]`.
    public func inputValues(inputIds: [Int32], attentionMask: [Int32]) throws -> [[Int32]] {
        guard inputIds.count == signature.seqLen, attentionMask.count == signature.seqLen else {
            throw EdgeM3Error("\(signature.name): inputs of \(inputIds.count)/\(attentionMask.count) values, expected \(signature.seqLen)")
        }
        return inputs.map { $0.name == EdgeM3Contract.inputIds ? inputIds : attentionMask }
    }

    /// The manifest's outputs from the model's flat float32 outputs (`read(i)`: output `i` in the
    /// model's order), batch axis dropped, colbert_vecs as rows; outputs the manifest does not
    /// list are never read.
    public func rawOutputs(_ read: (Int) throws -> [Float]) throws -> RawOutputs {
        func flat(_ name: String) throws -> (values: [Float], shape: [Int])? {
            guard let spec = signature.output(named: name), let i = outputs.firstIndex(where: { $0.name == name }) else {
                return nil
            }
            let values = try read(i)
            let count = spec.shape.reduce(1, *)
            if values.count != count {
                throw EdgeM3Error("\(signature.name): output \(name) has \(values.count) values, expected \(count) (\(spec.shape))")
            }
            return (values, spec.shape)
        }
        var colbert: [[Float]]? = nil
        if let (values, shape) = try flat(EdgeM3Contract.colbertVecs) {  // [1, L-1, H]
            let width = shape.last ?? 0
            colbert = width == 0 ? [] : stride(from: 0, to: values.count, by: width).map { Array(values[$0..<($0 + width)]) }
        }
        return RawOutputs(denseVecs: try flat(EdgeM3Contract.denseVecs)?.values,
                          sparseWeights: try flat(EdgeM3Contract.sparseWeights)?.values, colbertVecs: colbert)
    }

    /// Refuses a model `file` (`keys`: its signature keys) that lacks one of the manifest's `signatures`.
    public static func requireSignatures(_ signatures: [Signature], file: String, keys: [String]) throws {
        if let missing = signatures.first(where: { !keys.contains($0.name) }) {
            throw EdgeM3Error("\(file): no signature \(missing.name) as manifest.json says (has \(keys))",
                              kind: .signatureMismatch)
        }
    }

    /// Every manifest signature of `model` bound to the runtime's view of the file (`keys`: the
    /// model's signature keys; `tensors(key)`: its inputs and outputs). One error for the first
    /// signature that is missing or differs.
    public static func bind(_ model: ModelEntry, keys: [String],
                            tensors: (String) throws -> (inputs: [TensorSpec], outputs: [TensorSpec])) throws -> [String: SignatureBinding] {
        try requireSignatures(model.signatures, file: model.file, keys: keys)
        var out = [String: SignatureBinding]()
        for s in model.signatures {
            let (inputs, outputs) = try tensors(s.name)
            out[s.name] = try SignatureBinding(s, inputs: inputs, outputs: outputs, file: model.file)
        }
        return out
    }
}
