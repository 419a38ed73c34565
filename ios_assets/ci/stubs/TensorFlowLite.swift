// Compile-only stand-in for TensorFlowLiteSwift (module `TensorFlowLite`), so CI can type-check
// Sources/EdgeM3/TFLiteRunner.swift with swiftc on Linux (tests/test_swift_kit.py). Not part of
// the package. Same names and call shapes as the real API (tensorflow/lite/swift/Sources:
// Interpreter.swift, Delegate.swift, SignatureRunner.swift, Tensor.swift); never executed: every
// body traps. The C module it imports is the stand-in in TensorFlowLiteC/.
import Foundation
import TensorFlowLiteC

public final class Interpreter {
    public struct Options: Equatable, Hashable {
        public var threadCount: Int? = nil
        public var isXNNPackEnabled: Bool = false
        public init() {}
    }

    public let delegates: [Delegate]?

    public init(modelPath: String, options: Options? = nil, delegates: [Delegate]? = nil) throws {
        fatalError("stub")
    }

    public var signatureKeys: [String] { fatalError("stub") }

    public func signatureRunner(with key: String) throws -> SignatureRunner { fatalError("stub") }
}

/// A delegate that the `Interpreter` uses to perform TensorFlow Lite model computations.
public protocol Delegate: AnyObject {
    typealias CDelegate = UnsafeMutablePointer<TfLiteDelegate>
    var cDelegate: CDelegate { get }
}

public final class SignatureRunner {
    public var inputs: [String] { fatalError("stub") }
    public var outputs: [String] { fatalError("stub") }

    public func invoke(with inputs: [String: Data]) throws { fatalError("stub") }

    public func input(named name: String) throws -> Tensor { fatalError("stub") }

    public func output(named name: String) throws -> Tensor { fatalError("stub") }
}

public struct Tensor {
    public let name: String
    public let dataType: DataType
    public let shape: Shape
    public let data: Data

    public enum DataType: Equatable, Hashable {
        case float16, bfloat16, float32, float64, int8, int16, uInt8, uInt16, int32, uInt32, int64, uInt64, bool
    }

    public struct Shape: Equatable, Hashable {
        public let rank: Int
        public let dimensions: [Int]
    }
}
