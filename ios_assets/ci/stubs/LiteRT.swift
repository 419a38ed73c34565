// Stand-in for LiteRT's Swift API (module `LiteRT`), so CI can compile and run
// Sources/EdgeM3/LiteRTRunner.swift on Linux (tests/test_swift_litert_runner.py). Not part of the
// package; never shipped. Compiled as LiteRT's Package.swift compiles the real one: tools 5.9,
// Swift 5 mode, no strict concurrency, so nothing here is Sendable (neither is the real API).
//
// Written from reading google-ai-edge/LiteRT's litert/swift/Sources/ at v2.2.0 and main
// (f67457790c, 2026-08-21): LiteRtError.swift, Environment.swift, Options.swift,
// OpaqueOptions.swift, TensorType.swift, TensorBuffer.swift, CompiledModel.swift. Every public
// declaration of those files is here with the real name, parameter labels, types, defaults and
// `throws`, except Options.addCustomOpKernel (its C kernel struct is not stood in for), the
// `internal` C-handle members and TensorType's internal C conversions. `LiteRtError` is whole: its
// 30 cases, `init(status:)` over every LiteRtStatus of litert_common.h (stubs/CLiteRT/) and
// `description`, as the real file has them. What the stand-in cannot do it refuses as LiteRT's
// native code refuses what it does not support, with kLiteRtStatusErrorUnsupported (Metal
// buffers; clearErrors / getErrorMessages without the buffer error reporter, as
// compiled_model.cc says; resizing a static input to another shape).
//
// What the behaviour copies (the real Swift calls one C function per step and turns a status
// other than kLiteRtStatusOk into `LiteRtError(status:)` through `checkStatus`; the stand-in
// does the same with the statuses LiteRT's C++ returns on that step):
// - CompiledModel(filePath:) of a file it cannot map: kLiteRtStatusErrorFileIO
//   (litert/core/util/flatbuffer_tools.cc, "Invalid allocation").
// - Options with no accelerator: kLiteRtStatusErrorInvalidArgument at compile ("No acceleration
//   provided.", litert/runtime/compiled_model.cc); accelerators without the CPU whose hardware no
//   registered accelerator serves (a GPU on a build without LiteRT's GPU accelerator, whose
//   registration fails quietly in auto_registration.cc): kLiteRtStatusErrorCompilation ("Some ops
//   are not accelerated. Add kLiteRtHwAcceleratorCpu ..."). $EDGE_M3_LITERT_STANDIN_ACCELERATORS
//   (default "cpu") lists the registered ones.
// - run: a cancellation function that answers true gives kLiteRtStatusCancelled ("Execution was
//   cancelled"); allocation and invoke failures are kLiteRtStatusErrorRuntimeFailure ("Failed to
//   allocate tensors", "Failed to invoke") - raise them with the variable below.
// - TensorBuffer.write of more bytes than the buffer: kLiteRtStatusErrorInvalidArgument;
//   read<T>: size / stride elements.
// - signatureKeys(), inputName / outputName, getInput/OutputTensorType by index, in the model's order;
//   a tensor type outside ElementType reads as `.none` (TensorType(cRankedType:)).
// Any failure on demand: $EDGE_M3_LITERT_STANDIN_FAIL = "<C function>:<status value>", e.g.
// "LiteRtRunCompiledModel:3": that C call of the real Swift code returns that status (the calls:
// `StandIn.calls`). The "model" is a real file's signatures as LiteRT reports them, named by
// $EDGE_M3_LITERT_STANDIN_MODEL (the TensorFlowLite stand-in's format, TensorFlowLite.swift):
// a run whose inputs match a recording gives its outputs (recorded from LiteRT), else zeros.
import CLiteRT
import Foundation

// MARK: - LiteRtError.swift

public enum LiteRtError: Error, CustomStringConvertible, Equatable {
  case invalidArgument
  case memoryAllocationFailure
  case runtimeFailure
  case missingInputTensor
  case unsupported
  case notFound
  case timeoutExpired
  case wrongVersion
  case unknown
  case alreadyExists
  case cancelled
  case fileIO
  case invalidFlatbuffer
  case dynamicLoading
  case serialization
  case compilation
  case indexOutOfBounds
  case invalidIrType
  case invalidGraphInvariant
  case graphModification
  case invalidToolConfig
  case legalizeNoMatch
  case invalidLegalization
  case patternNoMatch
  case invalidTransformation
  case unsupportedRuntimeVersion
  case unsupportedCompilerVersion
  case incompatibleByteCodeVersion
  case unsupportedOpShapeInferer
  case shapeInferenceFailed

  public init(status: LiteRtStatus) {
    switch status {
    case kLiteRtStatusErrorInvalidArgument: self = .invalidArgument
    case kLiteRtStatusErrorMemoryAllocationFailure: self = .memoryAllocationFailure
    case kLiteRtStatusErrorRuntimeFailure: self = .runtimeFailure
    case kLiteRtStatusErrorMissingInputTensor: self = .missingInputTensor
    case kLiteRtStatusErrorUnsupported: self = .unsupported
    case kLiteRtStatusErrorNotFound: self = .notFound
    case kLiteRtStatusErrorTimeoutExpired: self = .timeoutExpired
    case kLiteRtStatusErrorWrongVersion: self = .wrongVersion
    case kLiteRtStatusErrorUnknown: self = .unknown
    case kLiteRtStatusErrorAlreadyExists: self = .alreadyExists
    case kLiteRtStatusCancelled: self = .cancelled
    case kLiteRtStatusErrorFileIO: self = .fileIO
    case kLiteRtStatusErrorInvalidFlatbuffer: self = .invalidFlatbuffer
    case kLiteRtStatusErrorDynamicLoading: self = .dynamicLoading
    case kLiteRtStatusErrorSerialization: self = .serialization
    case kLiteRtStatusErrorCompilation: self = .compilation
    case kLiteRtStatusErrorIndexOOB: self = .indexOutOfBounds
    case kLiteRtStatusErrorInvalidIrType: self = .invalidIrType
    case kLiteRtStatusErrorInvalidGraphInvariant: self = .invalidGraphInvariant
    case kLiteRtStatusErrorGraphModification: self = .graphModification
    case kLiteRtStatusErrorInvalidToolConfig: self = .invalidToolConfig
    case kLiteRtStatusLegalizeNoMatch: self = .legalizeNoMatch
    case kLiteRtStatusErrorInvalidLegalization: self = .invalidLegalization
    case kLiteRtStatusPatternNoMatch: self = .patternNoMatch
    case kLiteRtStatusInvalidTransformation: self = .invalidTransformation
    case kLiteRtStatusErrorUnsupportedRuntimeVersion: self = .unsupportedRuntimeVersion
    case kLiteRtStatusErrorUnsupportedCompilerVersion: self = .unsupportedCompilerVersion
    case kLiteRtStatusErrorIncompatibleByteCodeVersion: self = .incompatibleByteCodeVersion
    case kLiteRtStatusErrorUnsupportedOpShapeInferer: self = .unsupportedOpShapeInferer
    case kLiteRtStatusErrorShapeInferenceFailed: self = .shapeInferenceFailed
    default: self = .unknown
    }
  }

  public var description: String {
    switch self {
    case .invalidArgument: return "Invalid argument"
    case .memoryAllocationFailure: return "Memory allocation failure"
    case .runtimeFailure: return "Runtime failure"
    case .missingInputTensor: return "Missing input tensor"
    case .unsupported: return "Unsupported operation"
    case .notFound: return "Not found"
    case .timeoutExpired: return "Timeout expired"
    case .wrongVersion: return "Wrong version"
    case .unknown: return "Unknown error"
    case .alreadyExists: return "Already exists"
    case .cancelled: return "Cancelled"
    case .fileIO: return "File I/O error"
    case .invalidFlatbuffer: return "Invalid flatbuffer"
    case .dynamicLoading: return "Dynamic loading error"
    case .serialization: return "Serialization error"
    case .compilation: return "Compilation error"
    case .indexOutOfBounds: return "Index out of bounds"
    case .invalidIrType: return "Invalid IR type"
    case .invalidGraphInvariant: return "Invalid graph invariant"
    case .graphModification: return "Graph modification error"
    case .invalidToolConfig: return "Invalid tool config"
    case .legalizeNoMatch: return "Legalize no match"
    case .invalidLegalization: return "Invalid legalization"
    case .patternNoMatch: return "Pattern no match"
    case .invalidTransformation: return "Invalid transformation"
    case .unsupportedRuntimeVersion: return "Unsupported runtime version"
    case .unsupportedCompilerVersion: return "Unsupported compiler version"
    case .incompatibleByteCodeVersion: return "Incompatible byte code version"
    case .unsupportedOpShapeInferer: return "Unsupported op shape inferer"
    case .shapeInferenceFailed: return "Shape inference failed"
    }
  }
}

@usableFromInline
internal func checkStatus(_ status: LiteRtStatus) throws {
  guard status == kLiteRtStatusOk else {
    throw LiteRtError(status: status)
  }
}

// MARK: - Environment.swift

public final class Environment {
  public enum Option {
    case compilerPluginLibraryDir(String)
    case dispatchLibraryDir(String)
    case compilerCacheDir(String)
    case runtimeLibraryDir(String)
    case autoRegisterAccelerators(Int64)
    case minLoggerSeverity(Int64)
    case compilerCacheMaxConfigsPerModel(Int64)
    case compilerCacheMaxTotalSize(Int64)
    case metalDevice(UnsafeRawPointer)
    case metalCommandQueue(UnsafeRawPointer)
  }

  /// The accelerators this environment registered (auto-registration: the CPU always; the GPU
  /// only where its accelerator library is in the app).
  fileprivate let registered: Set<Accelerator>

  public init(options: [Option] = []) throws {
    try checkStatus(StandIn.status(of: "LiteRtCreateEnvironment"))
    registered = StandIn.registeredAccelerators()
  }

  public func supportsFP16() throws -> Bool {
    try checkStatus(StandIn.status(of: "LiteRtEnvironmentSupportsFP16"))
    return false
  }

  public func hasGpuEnvironment() -> Bool {
    registered.contains(.gpu)
  }

  public func supportsClGlInterop() throws -> Bool { false }

  public func supportsAhwbClInterop() throws -> Bool { false }

  public func supportsAhwbGlInterop() throws -> Bool { false }
}

// MARK: - Options.swift

public enum Accelerator: Int32 {
  case none = 0
  case cpu = 1  // 1 << 0
  case gpu = 2  // 1 << 1
  case npu = 4  // 1 << 2
}

public final class Options {
  fileprivate var bitmask: Int32 = 0
  fileprivate var opaque: [OpaqueOptions] = []

  public init() throws {
    try checkStatus(StandIn.status(of: "LiteRtCreateOptions"))
  }

  public func setHardwareAccelerators(_ accelerators: Set<Accelerator>) throws {
    try checkStatus(StandIn.status(of: "LiteRtSetOptionsHardwareAccelerators"))
    bitmask = accelerators.reduce(0) { $0 | $1.rawValue }
  }

  public func hardwareAccelerators() throws -> Set<Accelerator> {
    try checkStatus(StandIn.status(of: "LiteRtGetOptionsHardwareAccelerators"))
    return Set([Accelerator.cpu, .gpu, .npu].filter { bitmask & $0.rawValue != 0 })
  }

  public func addExternalTensorBinding(
    signatureName: String,
    tensorName: String,
    data: UnsafeMutableRawPointer,
    sizeBytes: Int
  ) throws {
    try checkStatus(StandIn.status(of: "LiteRtAddExternalTensorBinding"))
  }

  public func addOpaqueOptions(_ opaqueOptions: OpaqueOptions) throws {
    try checkStatus(StandIn.status(of: "LiteRtAddOpaqueOptions"))
    if let last = opaque.last { last.nextOptions = opaqueOptions }
    opaque.append(opaqueOptions)
    opaqueOptions.owned = false
  }

  public func opaqueOptions() throws -> OpaqueOptions? {
    try checkStatus(StandIn.status(of: "LiteRtGetOpaqueOptions"))
    return opaque.first
  }
}

// MARK: - OpaqueOptions.swift

public final class OpaqueOptions {
  private let payload: UnsafeMutableRawPointer
  private let destructor: @convention(c) (UnsafeMutableRawPointer?) -> Void
  internal var owned: Bool
  public let identifier: String

  public init(
    identifier: String,
    payload: UnsafeMutableRawPointer,
    destructor: @escaping @convention(c) (UnsafeMutableRawPointer?) -> Void = { _ in }
  ) throws {
    try checkStatus(StandIn.status(of: "LiteRtCreateOpaqueOptions"))
    self.identifier = identifier
    self.payload = payload
    self.destructor = destructor
    owned = true
  }

  /// The next options in the chain (LiteRtGetNextOpaqueOptions).
  fileprivate var nextOptions: OpaqueOptions?

  deinit {
    destructor(payload)  // LiteRT's options (or these, while owned) call the payload's deleter
  }

  public var data: UnsafeMutableRawPointer? { payload }

  public func findData(identifier: String) -> UnsafeMutableRawPointer? {
    var options: OpaqueOptions? = self
    while let o = options {
      if o.identifier == identifier { return o.payload }
      options = o.nextOptions
    }
    return nil
  }

  public func next() -> OpaqueOptions? { nextOptions }

  public func append(_ other: OpaqueOptions) throws {
    var last = self
    while let n = last.nextOptions { last = n }
    last.nextOptions = other
    other.owned = false
  }

  public func pop() throws {
    var previous: OpaqueOptions? = nil
    var last = self
    while let n = last.nextOptions {
      previous = last
      last = n
    }
    guard let previous else { throw LiteRtError.invalidArgument }  // the chain's own head
    previous.nextOptions = nil
  }
}

// MARK: - TensorType.swift

public enum ElementType: UInt32 {
  case none = 0
  case bool = 6
  case int2 = 20
  case int4 = 18
  case int8 = 9
  case int16 = 7
  case int32 = 2
  case int64 = 4
  case uint8 = 3
  case uint16 = 17
  case uint32 = 16
  case uint64 = 13
  case float16 = 10
  case bfloat16 = 19
  case float32 = 1
  case float64 = 11
  case complex64 = 8
  case complex128 = 12
  case tfResource = 14
  case tfString = 5
  case tfVariant = 15

  public init?(cType: LiteRtElementType) {
    self.init(rawValue: cType.rawValue)
  }

  public var cType: LiteRtElementType {
    LiteRtElementType(rawValue: self.rawValue)
  }
}

public struct Layout: Equatable {
  public let dimensions: [Int]
  public let strides: [Int]

  public init(dimensions: [Int], strides: [Int] = []) {
    self.dimensions = dimensions
    self.strides = strides
  }

  public var rank: Int { dimensions.count }

  public var hasStrides: Bool { !strides.isEmpty }

  public var elementCount: Int? {
    var count = 1
    for dim in dimensions {
      if dim < 0 { return nil }
      count *= dim
    }
    return count
  }
}

public struct TensorType: Equatable {
  public let elementType: ElementType
  public let layout: Layout

  public init(elementType: ElementType, layout: Layout) {
    self.elementType = elementType
    self.layout = layout
  }
}

// MARK: - TensorBuffer.swift

public enum TensorBufferType: Int32 {
  case unknown = 0
  case hostMemory = 1
  case ahwb = 2
  case ion = 3
  case dmaBuf = 4
  case fastRpc = 5
  case glBuffer = 6
  case glTexture = 7
  case openClBuffer = 10
  case openClBufferFp16 = 11
  case openClTexture = 12
  case openClTextureFp16 = 13
  case openClBufferPacked = 14
  case openClImageBuffer = 15
  case openClImageBufferFp16 = 16
  case webGpuBuffer = 20
  case webGpuBufferFp16 = 21
  case webGpuTexture = 22
  case webGpuTextureFp16 = 23
  case webGpuImageBuffer = 24
  case webGpuImageBufferFp16 = 25
  case webGpuBufferPacked = 26
  case metalBuffer = 30
  case metalBufferFp16 = 31
  case metalTexture = 32
  case metalTextureFp16 = 33
  case metalBufferPacked = 34
  case vulkanBuffer = 40
  case vulkanBufferFp16 = 41
  case vulkanTexture = 42
  case vulkanTextureFp16 = 43
  case vulkanImageBuffer = 44
  case vulkanImageBufferFp16 = 45
  case vulkanBufferPacked = 46

  public init(cType: LiteRtTensorBufferType) {
    self = TensorBufferType(rawValue: Int32(cType.rawValue)) ?? .unknown
  }

  public var cType: LiteRtTensorBufferType {
    return LiteRtTensorBufferType(rawValue: UInt32(self.rawValue))
  }
}

public enum TensorBufferLockMode {
  case read
  case write
  case readWrite

  public var cMode: LiteRtTensorBufferLockMode {
    switch self {
    case .read: return kLiteRtTensorBufferLockModeRead
    case .write: return kLiteRtTensorBufferLockModeWrite
    case .readWrite: return kLiteRtTensorBufferLockModeReadWrite
    }
  }
}

public final class TensorBufferRequirements {
  public let bufferSize: Int
  public let alignment: Int
  public let supportedTypes: [TensorBufferType]
  public let strides: [Int]

  fileprivate init(bufferSize: Int) {
    self.bufferSize = bufferSize
    alignment = 64
    supportedTypes = [.hostMemory]
    strides = []
  }
}

public final class TensorBuffer {
  /// The host memory: the stand-in's own (managed) or the caller's (wrapped, never freed here).
  fileprivate let address: UnsafeMutableRawPointer
  private let managed: Bool
  private let byteCount: Int
  public let tensorType: TensorType?
  public let type: TensorBufferType

  /// LiteRtGetTensorBufferPackedSize: the tensor's bytes.
  public var size: Int { byteCount }
  public var bufferSize: Int { byteCount }
  public var offset: Int { 0 }

  private init(address: UnsafeMutableRawPointer, managed: Bool, size: Int, tensorType: TensorType,
               type: TensorBufferType) {
    self.address = address
    self.managed = managed
    byteCount = size
    self.tensorType = tensorType
    self.type = type
  }

  public convenience init(
    environment: Environment,
    bufferType: TensorBufferType,
    tensorType: TensorType,
    size: Int
  ) throws {
    try checkStatus(StandIn.status(of: "LiteRtCreateManagedTensorBuffer"))
    guard bufferType == .hostMemory else { throw LiteRtError.unsupported }  // no GPU buffers here
    let memory = UnsafeMutableRawPointer.allocate(byteCount: max(size, 1), alignment: 64)
    memory.initializeMemory(as: UInt8.self, repeating: 0, count: max(size, 1))
    self.init(address: memory, managed: true, size: size, tensorType: tensorType, type: bufferType)
  }

  public convenience init(
    hostBufferAddressAddress: UnsafeMutableRawPointer,
    size: Int,
    tensorType: TensorType
  ) throws {
    try checkStatus(StandIn.status(of: "LiteRtCreateTensorBufferFromHostMemory"))
    self.init(address: hostBufferAddressAddress, managed: false, size: size, tensorType: tensorType,
              type: .hostMemory)
  }

  public convenience init(
    metalBuffer: UnsafeMutableRawPointer,
    size: Int,
    tensorType: TensorType,
    bufferType: TensorBufferType,
    environment: Environment
  ) throws {
    throw LiteRtError.unsupported  // LiteRtCreateTensorBufferFromMetalMemory: no Metal here
  }

  deinit {
    if managed { address.deallocate() }
  }

  public func write<T>(_ data: [T]) throws {
    try checkStatus(StandIn.status(of: "LiteRtLockTensorBuffer"))
    let byteCount = data.count * MemoryLayout<T>.stride
    guard byteCount <= size else {
      throw LiteRtError.invalidArgument
    }
    data.withUnsafeBytes { source in
      if let sourceAddr = source.baseAddress {
        address.copyMemory(from: sourceAddr, byteCount: byteCount)
      }
    }
  }

  public func read<T>() throws -> [T] {
    try checkStatus(StandIn.status(of: "LiteRtLockTensorBuffer"))
    let elementCount = size / MemoryLayout<T>.stride
    let typedPointer = address.bindMemory(to: T.self, capacity: elementCount)
    return Array(UnsafeBufferPointer(start: typedPointer, count: elementCount))
  }

  public func lock(mode: TensorBufferLockMode) throws -> UnsafeMutableRawPointer {
    try checkStatus(StandIn.status(of: "LiteRtLockTensorBuffer"))
    return address
  }

  public func unlock() throws {
    try checkStatus(StandIn.status(of: "LiteRtUnlockTensorBuffer"))
  }

  public func metalMemory() throws -> UnsafeMutableRawPointer {
    throw LiteRtError.unsupported  // LiteRtGetTensorBufferMetalMemory of a host buffer
  }

  fileprivate var bytes: Data { Data(bytes: address, count: byteCount) }

  fileprivate func fill(_ data: Data) {
    data.withUnsafeBytes { address.copyMemory(from: $0.baseAddress!, byteCount: min($0.count, byteCount)) }
  }
}

// MARK: - CompiledModel.swift

/// A compiled LiteRT model ready for execution.
public final class CompiledModel {
  public let environment: Environment
  public let options: Options?
  private let model: StandInModel
  private var cancellation: (userData: UnsafeMutableRawPointer?, check: @convention(c) (UnsafeMutableRawPointer?) -> Bool)?

  private static func makeDefaultOptions() throws -> Options {
    let options = try Options()
    try options.setHardwareAccelerators([.cpu])
    return options
  }

  public init(filePath: String, environment: Environment, options: Options? = nil) throws {
    var status = StandIn.status(of: "LiteRtCreateModelFromFile")
    if status == kLiteRtStatusOk && !FileManager.default.isReadableFile(atPath: filePath) {
      status = kLiteRtStatusErrorFileIO
    }
    (self.options, model) = try Self.open(status, environment: environment, options: options)
    self.environment = environment
  }

  public init(data: Data, environment: Environment, options: Options? = nil) throws {
    let status = data.isEmpty ? kLiteRtStatusErrorInvalidArgument : StandIn.status(of: "LiteRtCreateModelFromBuffer")
    (self.options, model) = try Self.open(status, environment: environment, options: options)
    self.environment = environment
  }

  public init(fd: Int32, offset: Int, size: Int, environment: Environment, options: Options? = nil) throws {
    let status = fd < 0 ? kLiteRtStatusErrorFileIO : StandIn.status(of: "LiteRtCreateModelFromFd")
    (self.options, model) = try Self.open(status, environment: environment, options: options)
    self.environment = environment
  }

  /// The model read (`loaded`: the status of the LiteRtCreateModelFrom* call), then compiled.
  private static func open(_ loaded: LiteRtStatus, environment: Environment,
                           options: Options?) throws -> (Options, StandInModel) {
    let resolvedOptions = try options ?? Self.makeDefaultOptions()
    try checkStatus(loaded)
    guard let model = StandInModel.load(from: "EDGE_M3_LITERT_STANDIN_MODEL") else { throw LiteRtError.invalidFlatbuffer }
    var status = StandIn.status(of: "LiteRtCreateCompiledModel")
    if status == kLiteRtStatusOk {
      status = StandIn.compile(requested: resolvedOptions.bitmask, registered: environment.registered)
    }
    try checkStatus(status)
    StandIn.record(options: resolvedOptions)
    return (resolvedOptions, model)
  }

  private var metadataEntries = [String: Data]()

  public func metadata(key: String) throws -> Data {
    try checkStatus(StandIn.status(of: "LiteRtGetModelMetadata"))
    guard let data = metadataEntries[key] else { throw LiteRtError.notFound }
    return data
  }

  public func addMetadata(key: String, data: Data) throws {
    try checkStatus(StandIn.status(of: "LiteRtAddModelMetadata"))
    metadataEntries[key] = data
  }

  public func signatureKeys() throws -> [String] {
    try checkStatus(StandIn.status(of: "LiteRtGetNumModelSignatures"))
    return model.signatures.map(\.key)
  }

  public func run(
    inputs: [TensorBuffer],
    outputs: [TensorBuffer],
    options: Options? = nil,
    signatureIndex: Int = 0
  ) throws {
    try checkStatus(StandIn.status(of: "LiteRtRunCompiledModel"))
    let signature = try self.signature(signatureIndex)
    guard inputs.count == signature.inputs.count, outputs.count == signature.outputs.count else {
      throw LiteRtError.invalidArgument
    }
    if let cancellation, cancellation.check(cancellation.userData) {
      throw LiteRtError(status: kLiteRtStatusCancelled)  // "Execution was cancelled"
    }
    let recording = signature.recordings.first { r in
      zip(signature.inputs, inputs).allSatisfy { spec, buffer in
        r.inputs[spec.key].map { StandInModel.bytes($0, dtype: spec.dtype) == buffer.bytes } ?? true
      }
    }
    for (spec, buffer) in zip(signature.outputs, outputs) {
      let data = recording?.outputs[spec.key].map { StandInModel.bytes($0, dtype: spec.dtype) }
        ?? Data(count: spec.byteCount)
      guard data.count == buffer.size else { throw LiteRtError.invalidArgument }
      buffer.fill(data)
    }
  }

  public func run(
    inputs: [TensorBuffer],
    options: Options? = nil,
    signatureIndex: Int = 0
  ) throws -> [TensorBuffer] {
    let outputs = try createOutputBuffers(signatureIndex: signatureIndex)
    try run(inputs: inputs, outputs: outputs, options: options, signatureIndex: signatureIndex)
    return outputs
  }

  /// CPU only: never asynchronous, so it runs and answers false.
  public func dispatch(
    inputs: [TensorBuffer],
    outputs: [TensorBuffer],
    options: Options? = nil,
    signatureIndex: Int = 0
  ) throws -> Bool {
    try run(inputs: inputs, outputs: outputs, options: options, signatureIndex: signatureIndex)
    return false
  }

  public func dispatch(
    inputs: [TensorBuffer],
    options: Options? = nil,
    signatureIndex: Int = 0
  ) throws -> (buffers: [TensorBuffer], isAsync: Bool) {
    let outputs = try createOutputBuffers(signatureIndex: signatureIndex)
    let isAsync = try dispatch(inputs: inputs, outputs: outputs, options: options, signatureIndex: signatureIndex)
    return (outputs, isAsync)
  }

  public func createInputBuffers(signatureIndex: Int = 0) throws -> [TensorBuffer] {
    try (0..<inputCount(signatureIndex: signatureIndex)).map { i in
      let requirements = try getInputBufferRequirements(inputIndex: i, signatureIndex: signatureIndex)
      return try TensorBuffer(environment: environment, bufferType: requirements.supportedTypes.first ?? .hostMemory,
                              tensorType: try getInputTensorType(inputIndex: i, signatureIndex: signatureIndex),
                              size: requirements.bufferSize)
    }
  }

  public func createOutputBuffers(signatureIndex: Int = 0) throws -> [TensorBuffer] {
    try (0..<outputCount(signatureIndex: signatureIndex)).map { i in
      let requirements = try getOutputBufferRequirements(outputIndex: i, signatureIndex: signatureIndex)
      guard requirements.bufferSize > 0 else { throw LiteRtError.runtimeFailure }
      return try TensorBuffer(environment: environment, bufferType: requirements.supportedTypes.first ?? .hostMemory,
                              tensorType: try getOutputTensorType(outputIndex: i, signatureIndex: signatureIndex),
                              size: requirements.bufferSize)
    }
  }

  public func inputCount(signatureIndex: Int = 0) throws -> Int {
    try checkStatus(StandIn.status(of: "LiteRtGetNumSignatureInputs"))
    return try signature(signatureIndex).inputs.count
  }

  public func outputCount(signatureIndex: Int = 0) throws -> Int {
    try checkStatus(StandIn.status(of: "LiteRtGetNumSignatureOutputs"))
    return try signature(signatureIndex).outputs.count
  }

  public func inputName(inputIndex: Int, signatureIndex: Int = 0) throws -> String {
    try checkStatus(StandIn.status(of: "LiteRtGetSignatureInputName"))
    return try tensor(signatureIndex, inputIndex, input: true).key
  }

  public func outputName(outputIndex: Int, signatureIndex: Int = 0) throws -> String {
    try checkStatus(StandIn.status(of: "LiteRtGetSignatureOutputName"))
    return try tensor(signatureIndex, outputIndex, input: false).key
  }

  public func getInputBufferRequirements(inputIndex: Int, signatureIndex: Int = 0) throws -> TensorBufferRequirements {
    try checkStatus(StandIn.status(of: "LiteRtGetCompiledModelInputBufferRequirements"))
    return TensorBufferRequirements(bufferSize: try tensor(signatureIndex, inputIndex, input: true).byteCount)
  }

  public func getOutputBufferRequirements(outputIndex: Int, signatureIndex: Int = 0) throws -> TensorBufferRequirements {
    try checkStatus(StandIn.status(of: "LiteRtGetCompiledModelOutputBufferRequirements"))
    return TensorBufferRequirements(bufferSize: try tensor(signatureIndex, outputIndex, input: false).byteCount)
  }

  public func getInputTensorType(inputIndex: Int, signatureIndex: Int = 0) throws -> TensorType {
    try checkStatus(StandIn.status(of: "LiteRtGetRankedTensorType"))
    return try tensor(signatureIndex, inputIndex, input: true).tensorType
  }

  public func getOutputTensorType(outputIndex: Int, signatureIndex: Int = 0) throws -> TensorType {
    try checkStatus(StandIn.status(of: "LiteRtGetRankedTensorType"))
    return try tensor(signatureIndex, outputIndex, input: false).tensorType
  }

  public func getInputTensorLayout(inputIndex: Int, signatureIndex: Int = 0) throws -> Layout {
    try checkStatus(StandIn.status(of: "LiteRtGetCompiledModelInputTensorLayout"))
    return try tensor(signatureIndex, inputIndex, input: true).tensorType.layout
  }

  public func getOutputTensorLayouts(signatureIndex: Int = 0, updateAllocation: Bool = true) throws -> [Layout] {
    try checkStatus(StandIn.status(of: "LiteRtGetCompiledModelOutputTensorLayouts"))
    return try signature(signatureIndex).outputs.map(\.tensorType.layout)
  }

  public func resizeInputTensor(inputIndex: Int, dimensions: [Int], signatureIndex: Int = 0) throws {
    try checkStatus(StandIn.status(of: "LiteRtCompiledModelResizeInputTensor"))
    guard try tensor(signatureIndex, inputIndex, input: true).shape == dimensions else { throw LiteRtError.unsupported }
  }

  public func resizeInputTensorNonStrict(inputIndex: Int, dimensions: [Int], signatureIndex: Int = 0) throws {
    try resizeInputTensor(inputIndex: inputIndex, dimensions: dimensions, signatureIndex: signatureIndex)
  }

  /// Unsupported without the buffer error reporter (compiled_model.cc), which the stand-in has not.
  public func clearErrors() throws {
    throw LiteRtError.unsupported
  }

  public func getErrorMessages() throws -> String {
    throw LiteRtError.unsupported
  }

  public func isFullyAccelerated() throws -> Bool {
    try checkStatus(StandIn.status(of: "LiteRtCompiledModelIsFullyAccelerated"))
    return false  // CPU only
  }

  public func setCancellationFunction(
    userData: UnsafeMutableRawPointer? = nil,
    checkCancelledFunc: @escaping @convention(c) (UnsafeMutableRawPointer?) -> Bool
  ) throws {
    try checkStatus(StandIn.status(of: "LiteRtSetCompiledModelCancellationFunction"))
    cancellation = (userData, checkCancelledFunc)
  }

  /// LiteRtGetModelSignature: an index past the model's signatures is refused.
  private func signature(_ index: Int) throws -> StandInModel.Signature {
    guard model.signatures.indices.contains(index) else { throw LiteRtError.indexOutOfBounds }
    return model.signatures[index]
  }

  private func tensor(_ signatureIndex: Int, _ index: Int, input: Bool) throws -> StandInModel.TensorSpec {
    let s = try signature(signatureIndex)
    let specs = input ? s.inputs : s.outputs
    guard specs.indices.contains(index) else { throw LiteRtError.indexOutOfBounds }
    return specs[index]
  }
}

// MARK: - stand-in only

/// What the stand-in's environment variables say, and what the last compile was given (for tests;
/// the real module has nothing of the kind).
enum StandIn {
  /// The C functions whose status a test can set ($EDGE_M3_LITERT_STANDIN_FAIL).
  static let calls: Set<String> = [
    "LiteRtCreateEnvironment", "LiteRtCreateOptions", "LiteRtSetOptionsHardwareAccelerators",
    "LiteRtGetOptionsHardwareAccelerators", "LiteRtCreateOpaqueOptions", "LiteRtAddOpaqueOptions",
    "LiteRtCreateModelFromFile", "LiteRtCreateCompiledModel", "LiteRtGetNumModelSignatures",
    "LiteRtGetNumSignatureInputs", "LiteRtGetNumSignatureOutputs", "LiteRtGetSignatureInputName",
    "LiteRtGetSignatureOutputName", "LiteRtGetRankedTensorType", "LiteRtGetCompiledModelInputBufferRequirements",
    "LiteRtGetCompiledModelOutputBufferRequirements", "LiteRtCreateManagedTensorBuffer", "LiteRtLockTensorBuffer",
    "LiteRtUnlockTensorBuffer", "LiteRtRunCompiledModel", "LiteRtCompiledModelIsFullyAccelerated",
    "LiteRtSetCompiledModelCancellationFunction", "LiteRtEnvironmentSupportsFP16", "LiteRtAddExternalTensorBinding",
    "LiteRtGetOpaqueOptions", "LiteRtCreateTensorBufferFromHostMemory", "LiteRtCreateModelFromBuffer",
    "LiteRtCreateModelFromFd", "LiteRtGetModelMetadata", "LiteRtAddModelMetadata",
    "LiteRtGetCompiledModelInputTensorLayout", "LiteRtGetCompiledModelOutputTensorLayouts",
    "LiteRtCompiledModelResizeInputTensor",
  ]

  static func status(of call: String) -> LiteRtStatus {
    precondition(calls.contains(call), call)
    guard let fail = ProcessInfo.processInfo.environment["EDGE_M3_LITERT_STANDIN_FAIL"] else { return kLiteRtStatusOk }
    let parts = fail.split(separator: ":")
    guard parts.count == 2, calls.contains(String(parts[0])), let code = UInt32(parts[1]) else {
      preconditionFailure("EDGE_M3_LITERT_STANDIN_FAIL=\(fail): expected <one of \(calls.sorted())>:<status value>")
    }
    return parts[0] == call ? LiteRtStatus(rawValue: code) : kLiteRtStatusOk
  }

  static func registeredAccelerators() -> Set<Accelerator> {
    let names = ProcessInfo.processInfo.environment["EDGE_M3_LITERT_STANDIN_ACCELERATORS"] ?? "cpu"
    return Set(names.split(separator: ",").compactMap { ["cpu": Accelerator.cpu, "gpu": .gpu, "npu": .npu][String($0)] })
  }

  /// LiteRtCompiledModelT::Create: no accelerator is an invalid argument; without the CPU, ops no
  /// registered accelerator takes are a compilation error.
  static func compile(requested: Int32, registered: Set<Accelerator>) -> LiteRtStatus {
    if requested == 0 { return kLiteRtStatusErrorInvalidArgument }
    if requested & Accelerator.cpu.rawValue != 0 { return kLiteRtStatusOk }
    let served = registered.contains { requested & $0.rawValue != 0 && $0 != .cpu }
    return served ? kLiteRtStatusOk : kLiteRtStatusErrorCompilation
  }

  private static let lock = NSLock()
  private static var last = ""

  static func record(options: Options) {
    let payloads = options.opaque.map { o -> String in
      "\(o.identifier): " + (o.data.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "")
    }
    lock.lock()
    last = "accelerators \(options.bitmask); " + payloads.joined(separator: "; ")
    lock.unlock()
  }
}

/// Stand-in only: the accelerator bitmask and the opaque options (identifier and payload as a C
/// string) the last CompiledModel was compiled with.
public func standInLastCompileOptions() -> String {
  StandIn.lockedLast()
}

extension StandIn {
  static func lockedLast() -> String {
    lock.lock()
    defer { lock.unlock() }
    return last
  }
}

/// LiteRT's types for the stand-in model's dtypes (ci/stubs/StandInModel.swift).
extension StandInModel {
  /// numpy's dtype names as LiteRT's element types (a name LiteRT's ElementType lacks: `.none`).
  static let elementTypes: [String: ElementType] = [
    "bool": .bool, "int8": .int8, "int16": .int16, "int32": .int32, "int64": .int64, "uint8": .uint8,
    "uint16": .uint16, "uint32": .uint32, "uint64": .uint64, "float16": .float16, "float32": .float32,
    "float64": .float64, "complex64": .complex64, "complex128": .complex128,
  ]
}

extension StandInModel.TensorSpec {
  var tensorType: TensorType {
    TensorType(elementType: StandInModel.elementTypes[dtype] ?? .none, layout: Layout(dimensions: shape))
  }
}
