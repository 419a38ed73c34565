// Stand-in for TensorFlowLiteSwift (module `TensorFlowLite`), so CI can compile and run
// Sources/EdgeM3/TFLiteRunner.swift on Linux (tests/test_swift_ios_binding.py). Not part of the
// package; never shipped. Compiled as the pod compiles the real one: Swift 5 mode, no strict
// concurrency (TensorFlowLiteSwift.podspec: swift_version '5.0'), so nothing here is Sendable.
//
// Pinned version: TensorFlowLiteSwift 2.17.0 (`pod 'TensorFlowLiteSwift', '~> 2.17'` in
// Podfile.snippet; 2.17.0 is the last stable release on CocoaPods trunk). Each declaration was
// written from reading tensorflow/tensorflow's tensorflow/lite/swift/Sources/ (the index's stored
// copies: Interpreter.swift @18be7438, SignatureRunner.swift @c7ffe901, Tensor.swift @7a625349,
// Delegate.swift @f841af26, InterpreterError.swift @aaa587bb, SignatureRunnerError.swift
// @de11fbc5, QuantizationParameters.swift @a22a2934; each file has one stored version of the 2.x API the
// pod builds from), not copied. Only what the kit uses, with the real names, types and throws.
//
// What the behaviour copies, because the kit depends on it:
// - `SignatureRunner.inputs` / `.outputs` are the signature's KEYS (TfLiteSignatureRunnerGetInputName),
//   `input(named:)` / `output(named:)` take a key, and the `Tensor` they return has `name` =
//   TfLiteTensorName, the tensor's name in the GRAPH (`embed_128_input_ids:0`,
//   `StatefulPartitionedCall:0`), not the key.
// - `invoke(with:)` copies each input by key (unknown key: failedToGetTensor; a byte count other
//   than the tensor's: invalidTensorDataCount), then runs.
// - A tensor type outside `Tensor.DataType` (int8, ...) throws invalidTensorDataType.
// - `signatureRunner(with:)` of an unknown key throws failedToCreateSignatureRunner; a missing
//   model file throws failedToLoadModel.
// - `Interpreter(modelPath:options:delegates:)` is a `convenience` init over a private designated
//   one (Model(filePath:) nil: failedToLoadModel; TfLiteInterpreterCreate nil, as when a delegate
//   fails to prepare: failedToCreateInterpreter). `SignatureRunner` allocates its tensors on
//   creation (SignatureRunner.swift's init calls `allocateTensors()`: failedToAllocateTensors);
//   `invoke(with:)` allocates if needed, copies each input (TfLiteTensorCopyFromBuffer failing:
//   failedToCopyDataToInputTensor), then runs (TfLiteSignatureRunnerInvoke failing:
//   failedToInvokeSignature(signatureKey:)).
// Each C-level failure on demand: $EDGE_M3_TFLITE_STANDIN_FAIL = load-model, create-interpreter,
// allocate-tensors, copy-input or invoke (`StandInFailure`).
// The "model" is a description of a real .tflite file's signatures, written by the test from
// LiteRT (`get_signature_runner(key).get_input_details()`), named by $EDGE_M3_TFLITE_STANDIN_MODEL:
// {"signatures": [{"key", "inputs": [{"key", "name", "shape", "dtype"}], "outputs": [...],
//   "recordings": [{"inputs": {key: [Int]}, "outputs": {key: [Float]}}]}]}. An invoke whose inputs
// match a recording gives its outputs (recorded from LiteRT on the same file); otherwise zeros.
import Foundation
import TensorFlowLiteC

/// Delegate.swift
public protocol Delegate: AnyObject {
    typealias CDelegate = UnsafeMutablePointer<TfLiteDelegate>
    var cDelegate: CDelegate { get }
}

/// InterpreterError.swift (the cases the stand-in throws, and the rest of the enum).
public enum InterpreterError: Error, Equatable, Hashable {
    case invalidTensorIndex(index: Int, maxIndex: Int)
    case invalidTensorDataCount(provided: Int, required: Int)
    case invalidTensorDataType
    case failedToLoadModel
    case failedToCreateInterpreter
    case failedToResizeInputTensor(index: Int)
    case failedToCopyDataToInputTensor
    case failedToAllocateTensors
    case allocateTensorsRequired
    case invokeInterpreterRequired
    case tensorFlowLiteError(String)
}

/// SignatureRunnerError.swift
public enum SignatureRunnerError: Error, Equatable, Hashable {
    case invalidTensorDataCount(provided: Int, required: Int)
    case invalidTensorDataType
    case failedToCreateSignatureRunner(signatureKey: String)
    case failedToGetTensor(tensorType: String, nameInSignature: String)
    case failedToResizeInputTensor(inputName: String)
    case failedToCopyDataToInputTensor
    case failedToAllocateTensors
    case failedToInvokeSignature(signatureKey: String)
    case allocateTensorsRequired
}

// InterpreterError.swift / SignatureRunnerError.swift: LocalizedError + CustomStringConvertible,
// `description` is the error's sentence (what `"\(error)"` prints).
extension InterpreterError: LocalizedError, CustomStringConvertible {
    public var errorDescription: String? {
        switch self {
        case .invalidTensorIndex(let index, let maxIndex): return "Invalid tensor index \(index), max index is \(maxIndex)."
        case .invalidTensorDataCount(let provided, let required):
            return "Provided data count \(provided) must match the required count \(required)."
        case .invalidTensorDataType: return "Tensor data type is unsupported or could not be determined due to a model error."
        case .failedToLoadModel: return "Failed to load the given model."
        case .failedToCreateInterpreter: return "Failed to create the interpreter."
        case .failedToResizeInputTensor(let index): return "Failed to resize input tensor at index \(index)."
        case .failedToCopyDataToInputTensor: return "Failed to copy data to input tensor."
        case .failedToAllocateTensors: return "Failed to allocate memory for input tensors."
        case .allocateTensorsRequired: return "Must call allocateTensors()."
        case .invokeInterpreterRequired: return "Must call invoke()."
        case .tensorFlowLiteError(let message): return "TensorFlow Lite Error: \(message)"
        }
    }
    public var description: String { errorDescription ?? "Unknown error." }
}

extension SignatureRunnerError: LocalizedError, CustomStringConvertible {
    public var errorDescription: String? {
        switch self {
        case .invalidTensorDataCount(let provided, let required):
            return "Provided data count \(provided) must match the required count \(required)."
        case .invalidTensorDataType: return "Tensor data type is unsupported or could not be determined due to a model error."
        case .failedToCreateSignatureRunner(let key): return "Failed to create a signature runner. Signature with key (\(key)) not found."
        case .failedToGetTensor(let type, let name): return "Failed to get \(type) tensor with \(type) name (\(name))."
        case .failedToResizeInputTensor(let name): return "Failed to resize input tensor with input name (\(name))."
        case .failedToCopyDataToInputTensor: return "Failed to copy data to input tensor."
        case .failedToAllocateTensors: return "Failed to allocate memory for input tensors."
        case .failedToInvokeSignature(let key): return "Failed to invoke the signature runner with key (\(key))."
        case .allocateTensorsRequired: return "Must call allocateTensors()."
        }
    }
    public var description: String { errorDescription ?? "Unknown error." }
}

/// QuantizationParameters.swift
public struct QuantizationParameters: Equatable, Hashable {
    public let scale: Float
    public let zeroPoint: Int
}

/// Tensor.swift: `name` is the graph's name of the tensor (TfLiteTensorName).
public struct Tensor: Equatable, Hashable {
    public let name: String
    public let dataType: DataType
    public let shape: Shape
    public let data: Data
    public let quantizationParameters: QuantizationParameters?

    /// Tensor.swift: exactly these eight (no int8, uInt16, ...).
    public enum DataType: Equatable, Hashable {
        case bool, uInt8, int16, int32, int64, float16, float32, float64
    }

    public struct Shape: Equatable, Hashable {
        public let rank: Int
        public let dimensions: [Int]
        public init(_ dimensions: [Int]) {
            rank = dimensions.count
            self.dimensions = dimensions
        }
    }
}

/// Interpreter.swift
public final class Interpreter {
    public struct Options: Equatable, Hashable {
        public var threadCount: Int? = nil
        public var isXNNPackEnabled: Bool = false
        public init() {}
    }

    public let options: Options?
    public let delegates: [Delegate]?
    fileprivate let model: StandInModel

    /// Interpreter.swift: `convenience`, over the private `init(model:options:delegates:)`.
    public convenience init(modelPath: String, options: Options? = nil, delegates: [Delegate]? = nil) throws {
        // Model(filePath:) is nil for a file TFLite cannot map and build a model from.
        guard FileManager.default.isReadableFile(atPath: modelPath), !StandInFailure.is(.loadModel) else {
            throw InterpreterError.failedToLoadModel
        }
        try self.init(model: StandInModel.load(from: "EDGE_M3_TFLITE_STANDIN_MODEL"), options: options, delegates: delegates)
    }

    private init(model: StandInModel?, options: Options? = nil, delegates: [Delegate]? = nil) throws {
        self.options = options
        self.delegates = delegates
        // TfLiteInterpreterCreate is nil (a delegate failed to prepare, ...): here also without a model description.
        guard let model, !StandInFailure.is(.createInterpreter) else { throw InterpreterError.failedToCreateInterpreter }
        self.model = model
    }

    /// The model's SignatureDef keys, in the file's order.
    public var signatureKeys: [String] { model.signatures.map(\.key) }

    public func signatureRunner(with key: String) throws -> SignatureRunner {
        guard let signature = model.signatures.first(where: { $0.key == key }) else {
            throw SignatureRunnerError.failedToCreateSignatureRunner(signatureKey: key)
        }
        return try SignatureRunner(interpreter: self, signature: signature)
    }
}

/// SignatureRunner.swift: not thread-safe; holds its interpreter.
public final class SignatureRunner {
    public let signatureKey: String
    private let interpreter: Interpreter
    private let signature: StandInModel.Signature
    private var inputData: [String: Data]
    private var outputData: [String: Data]

    private var isTensorsAllocationNeeded = true

    /// SignatureRunner.swift: `internal init(interpreter:signatureKey:) throws`, which ends with
    /// `try allocateTensors()`.
    fileprivate init(interpreter: Interpreter, signature: StandInModel.Signature) throws {
        self.interpreter = interpreter
        self.signature = signature
        signatureKey = signature.key
        inputData = Dictionary(uniqueKeysWithValues: signature.inputs.map { ($0.key, Data(count: $0.byteCount)) })
        outputData = Dictionary(uniqueKeysWithValues: signature.outputs.map { ($0.key, Data(count: $0.byteCount)) })
        try allocateTensors()
    }

    /// The signature's input keys (TfLiteSignatureRunnerGetInputName), not tensor names.
    public var inputs: [String] { signature.inputs.map(\.key) }

    /// The signature's output keys (TfLiteSignatureRunnerGetOutputName), not tensor names.
    public var outputs: [String] { signature.outputs.map(\.key) }

    public func invoke(with inputs: [String: Data]) throws {
        try allocateTensors()
        for (key, data) in inputs {
            try copy(data, toInputNamed: key)
        }
        guard !StandInFailure.is(.invoke) else {  // TfLiteSignatureRunnerInvoke != kTfLiteOk
            throw SignatureRunnerError.failedToInvokeSignature(signatureKey: signatureKey)
        }
        let recording = signature.recordings.first { r in
            r.inputs.allSatisfy { key, values in inputData[key] == StandInModel.bytes(values, dtype: "int32") }
        }
        for spec in signature.outputs {
            outputData[spec.key] = recording?.outputs[spec.key].map { StandInModel.bytes($0, dtype: spec.dtype) }
                ?? Data(count: spec.byteCount)
        }
    }

    public func input(named name: String) throws -> Tensor { try tensor(named: name, input: true) }

    public func output(named name: String) throws -> Tensor { try tensor(named: name, input: false) }

    public func copy(_ data: Data, toInputNamed name: String) throws {
        guard let spec = signature.inputs.first(where: { $0.key == name }) else {
            throw SignatureRunnerError.failedToGetTensor(tensorType: "input", nameInSignature: name)
        }
        guard data.count == spec.byteCount else {
            throw SignatureRunnerError.invalidTensorDataCount(provided: data.count, required: spec.byteCount)
        }
        guard !StandInFailure.is(.copyInput) else { throw SignatureRunnerError.failedToCopyDataToInputTensor }
        inputData[name] = data
    }

    public func allocateTensors() throws {
        if !isTensorsAllocationNeeded { return }
        guard !StandInFailure.is(.allocateTensors) else { throw SignatureRunnerError.failedToAllocateTensors }
        isTensorsAllocationNeeded = false
    }

    private func tensor(named key: String, input: Bool) throws -> Tensor {
        let specs = input ? signature.inputs : signature.outputs
        guard let spec = specs.first(where: { $0.key == key }), let data = (input ? inputData : outputData)[key] else {
            throw SignatureRunnerError.failedToGetTensor(tensorType: input ? "input" : "output", nameInSignature: key)
        }
        guard let dataType = StandInModel.dataTypes[spec.dtype] else { throw SignatureRunnerError.invalidTensorDataType }
        return Tensor(name: spec.name, dataType: dataType, shape: Tensor.Shape(spec.shape), data: data,
                      quantizationParameters: nil)
    }
}

/// The C-level failure $EDGE_M3_TFLITE_STANDIN_FAIL names (see the top comment), if any.
enum StandInFailure: String, CaseIterable {
    case loadModel = "load-model", createInterpreter = "create-interpreter", allocateTensors = "allocate-tensors"
    case copyInput = "copy-input", invoke

    static func `is`(_ failure: StandInFailure) -> Bool {
        guard let name = ProcessInfo.processInfo.environment["EDGE_M3_TFLITE_STANDIN_FAIL"] else { return false }
        guard let named = StandInFailure(rawValue: name) else {
            preconditionFailure("EDGE_M3_TFLITE_STANDIN_FAIL=\(name): expected one of \(allCases.map(\.rawValue))")
        }
        return named == failure
    }
}

/// TensorFlowLiteSwift's types for the stand-in model's dtypes (ci/stubs/StandInModel.swift).
extension StandInModel {
    static let dataTypes: [String: Tensor.DataType] = [
        "bool": .bool, "uint8": .uInt8, "int16": .int16, "int32": .int32, "int64": .int64,
        "float16": .float16, "float32": .float32, "float64": .float64,
    ]
}
