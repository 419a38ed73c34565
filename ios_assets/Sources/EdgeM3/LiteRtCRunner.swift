// The live runner for desktop apps and tools (macOS, Linux): LiteRT's C API, loaded at run time
// from the library it is given (the ai-edge-litert wheel's libLiteRt.so / .dylib), with the C
// function types declared here (no LiteRT headers in the kit). The same runtime is what
// Android's LiteRT CompiledModel wraps; CI runs golden.json through it (tests/test_swift_kit.py).
// Names, inputs and outputs go through SignatureBinding (ModelRunner.swift), as on a phone.
// Desktop only: on iOS, tvOS, watchOS, visionOS (and Mac Catalyst) this file compiles to nothing,
// whether the app takes the kit as a package or copies its sources (dlopen of a library outside
// the app is not allowed there; README "Adding the kit to an app").
#if os(macOS) || os(Linux)
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif
import Foundation

/// LiteRT's C API in one shared library, opened with `dlopen` (never closed: the process keeps it).
/// The function types follow litert/c/litert_*.h (LiteRT 2.x): handles are opaque pointers,
/// `LiteRtParamIndex` is `size_t`, statuses are `int` (0: ok).
nonisolated public final class LiteRtLibrary: @unchecked Sendable {  // immutable after init
    public let path: String

    typealias Handle = OpaquePointer
    typealias Out<T> = UnsafeMutablePointer<T>
    typealias CString = UnsafePointer<CChar>
    typealias Deleter = @convention(c) (UnsafeMutableRawPointer?) -> Void

    let createEnvironment: @convention(c) (Int32, UnsafeRawPointer?, Out<Handle?>) -> Int32
    let destroyEnvironment: @convention(c) (Handle?) -> Void
    let createModelFromFile: @convention(c) (Handle?, CString, Out<Handle?>) -> Int32
    let destroyModel: @convention(c) (Handle?) -> Void
    let getNumModelSignatures: @convention(c) (Handle?, Out<Int>) -> Int32
    let getModelSignature: @convention(c) (Handle?, Int, Out<Handle?>) -> Int32
    let getSignatureKey: @convention(c) (Handle?, Out<CString?>) -> Int32
    let getNumSignatureInputs: @convention(c) (Handle?, Out<Int>) -> Int32
    let getNumSignatureOutputs: @convention(c) (Handle?, Out<Int>) -> Int32
    let getSignatureInputName: @convention(c) (Handle?, Int, Out<CString?>) -> Int32
    let getSignatureOutputName: @convention(c) (Handle?, Int, Out<CString?>) -> Int32
    let getSignatureInputTensorByIndex: @convention(c) (Handle?, Int, Out<Handle?>) -> Int32
    let getSignatureOutputTensorByIndex: @convention(c) (Handle?, Int, Out<Handle?>) -> Int32
    /// Fills a `LiteRtRankedTensorType` (see `RankedTensorType`).
    let getRankedTensorType: @convention(c) (Handle?, UnsafeMutableRawPointer) -> Int32
    let createOptions: @convention(c) (Out<Handle?>) -> Int32
    let destroyOptions: @convention(c) (Handle?) -> Void
    let setOptionsHardwareAccelerators: @convention(c) (Handle?, Int32) -> Int32
    let createOpaqueOptions: @convention(c) (CString, UnsafeMutableRawPointer?, Deleter?, Out<Handle?>) -> Int32
    let addOpaqueOptions: @convention(c) (Handle?, Handle?) -> Int32
    let createCompiledModel: @convention(c) (Handle?, Handle?, Handle?, Out<Handle?>) -> Int32
    let destroyCompiledModel: @convention(c) (Handle?) -> Void
    let createTensorBufferFromHostMemory: @convention(c) (UnsafeRawPointer, UnsafeMutableRawPointer, Int, Deleter?, Out<Handle?>) -> Int32
    let destroyTensorBuffer: @convention(c) (Handle?) -> Void
    let lockTensorBuffer: @convention(c) (Handle?, Out<UnsafeMutableRawPointer?>, Int32) -> Int32
    let unlockTensorBuffer: @convention(c) (Handle?) -> Int32
    let runCompiledModel: @convention(c) (Handle?, Int, Int, Out<Handle?>, Int, Out<Handle?>) -> Int32

    /// Opens `path`; one line when it is not there, not a library, or not LiteRT's C API.
    public init(path: String) throws {
        guard FileManager.default.fileExists(atPath: path) else {
            throw EdgeM3Error("\(path): no such LiteRT library (libLiteRt.so / libLiteRt.dylib of the ai-edge-litert wheel)",
                              kind: .runtimeMissing)
        }
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "dlopen failed"
            throw EdgeM3Error("\(path): cannot load it as a library (\(reason))", kind: .runtimeMissing)
        }
        func symbol<T>(_ name: String) throws -> T {
            guard let p = dlsym(handle, name) else {
                throw EdgeM3Error("\(path): not LiteRT's C API 2.x (no \(name))", kind: .runtimeMissing)
            }
            return unsafeBitCast(p, to: T.self)
        }
        self.path = path
        createEnvironment = try symbol("LiteRtCreateEnvironment")
        destroyEnvironment = try symbol("LiteRtDestroyEnvironment")
        createModelFromFile = try symbol("LiteRtCreateModelFromFile")
        destroyModel = try symbol("LiteRtDestroyModel")
        getNumModelSignatures = try symbol("LiteRtGetNumModelSignatures")
        getModelSignature = try symbol("LiteRtGetModelSignature")
        getSignatureKey = try symbol("LiteRtGetSignatureKey")
        getNumSignatureInputs = try symbol("LiteRtGetNumSignatureInputs")
        getNumSignatureOutputs = try symbol("LiteRtGetNumSignatureOutputs")
        getSignatureInputName = try symbol("LiteRtGetSignatureInputName")
        getSignatureOutputName = try symbol("LiteRtGetSignatureOutputName")
        getSignatureInputTensorByIndex = try symbol("LiteRtGetSignatureInputTensorByIndex")
        getSignatureOutputTensorByIndex = try symbol("LiteRtGetSignatureOutputTensorByIndex")
        getRankedTensorType = try symbol("LiteRtGetRankedTensorType")
        createOptions = try symbol("LiteRtCreateOptions")
        destroyOptions = try symbol("LiteRtDestroyOptions")
        setOptionsHardwareAccelerators = try symbol("LiteRtSetOptionsHardwareAccelerators")
        createOpaqueOptions = try symbol("LiteRtCreateOpaqueOptions")
        addOpaqueOptions = try symbol("LiteRtAddOpaqueOptions")
        createCompiledModel = try symbol("LiteRtCreateCompiledModel")
        destroyCompiledModel = try symbol("LiteRtDestroyCompiledModel")
        createTensorBufferFromHostMemory = try symbol("LiteRtCreateTensorBufferFromHostMemory")
        destroyTensorBuffer = try symbol("LiteRtDestroyTensorBuffer")
        lockTensorBuffer = try symbol("LiteRtLockTensorBuffer")
        unlockTensorBuffer = try symbol("LiteRtUnlockTensorBuffer")
        runCompiledModel = try symbol("LiteRtRunCompiledModel")
    }

    // litert_common.h / litert_model_types.h values the runner uses.
    static let hwAcceleratorCpu: Int32 = 1
    static let lockRead: Int32 = 0
    static let lockWrite: Int32 = 1
    /// The CPU accelerator's opaque options: identifier and TOML keys (litert/c/options/litert_cpu_options.cc).
    static let cpuOptionsIdentifier = "xnnpack"

    /// `status == 0`, else one line naming the call and the status (litert_common.h's codes).
    func check(_ status: Int32, _ call: @autoclosure () -> String) throws {
        if status == 0 { return }
        let names = [1: "invalid argument", 2: "memory allocation failure", 3: "runtime failure",
                     4: "missing input tensor", 5: "unsupported", 6: "not found", 7: "timeout expired",
                     8: "wrong version", 9: "unknown", 10: "already exists"]
        throw EdgeM3Error("LiteRT \(call()): status \(status) (\(names[Int(status)] ?? "error"))", kind: .runtimeFailed)
    }
}

/// `LiteRtRankedTensorType` (litert_model_types.h, 72 bytes on 64-bit): element type (int32 enum,
/// TfLiteType's values), then `LiteRtLayout`: rank in the low 7 bits of a 32-bit bitfield word,
/// `int32_t dimensions[8]`, `uint32_t strides[8]`. Read from the bytes the library wrote.
nonisolated struct RankedTensorType {
    static let size = 72
    static let maxRank = 8
    var bytes = [UInt8](repeating: 0, count: 128)  // room to spare: the library writes `size`

    var elementType: Int32 { read(Int32.self, at: 0) }
    var rank: Int { Int(read(UInt32.self, at: 4) & 0x7F) }
    var shape: [Int] { (0..<min(rank, Self.maxRank)).map { Int(read(Int32.self, at: 8 + 4 * $0)) } }

    /// The manifest's dtype names for what the kit reads; others by their LiteRT number.
    var dtype: String {
        switch elementType {
        case 1: return "float32"
        case 2: return "int32"
        default: return "element type \(elementType)"
        }
    }

    private func read<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
    }
}

/// A bundle's model on LiteRT's CompiledModel (CPU, XNNPACK): every manifest signature bound to
/// the model's own at open time (a model whose signatures differ from the manifest is refused),
/// one set of host-memory buffers per signature, made once and reused. Not thread-safe:
/// `EdgeM3Embedder` serialises calls.
nonisolated public final class LiteRtCRunner: ModelRunner {
    public let library: LiteRtLibrary
    public let threads: Int
    /// The model file's signature keys, in its order.
    public private(set) var signatureKeys = [String]()
    private var environment: OpaquePointer?
    private var model: OpaquePointer?
    private var options: OpaquePointer?
    private var compiled: OpaquePointer?
    private var slots = [String: Slot]()

    /// One signature: its index in the model, its binding, and its buffers (model order).
    private struct Slot {
        var index: Int
        var binding: SignatureBinding
        var inputs: [OpaquePointer?]
        var outputs: [OpaquePointer?]
    }
    private var memory = [UnsafeMutableRawPointer]()  // the buffers' host memory, ours to free

    /// Opens `modelPath` for the manifest's `model` entry with `threads` XNNPACK threads and its
    /// in-memory weight cache (the signatures share one packed copy of the weights, as Python's
    /// LiteRTRunner does). `file`: the manifest's entry for the model file, checked first (size,
    /// SHA-256). Give it unless the file is already checked (EdgeM3Embedder does): LiteRT 2.x does
    /// not verify the flatbuffer, and a file cut short crashes the process inside LiteRT.
    public init(library: LiteRtLibrary, modelPath: String, model entry: ModelEntry, file: FileEntry? = nil,
                threads: Int = EdgeM3Contract.deviceThreads) throws {
        if threads < 1 { throw EdgeM3Error("threads: \(threads), expected 1 or more") }
        self.library = library
        self.threads = threads
        let lib = library
        do {
            try lib.check(lib.createEnvironment(0, nil, &environment), "LiteRtCreateEnvironment")
            guard FileManager.default.fileExists(atPath: modelPath) else { throw EdgeM3Error("\(modelPath): not found", kind: .corruptBundle) }
            if let file { try FileCheck.verify(URL(fileURLWithPath: modelPath), against: file) }
            try lib.check(lib.createModelFromFile(environment, modelPath, &model),
                          "could not read \(modelPath) as a model")
            var count = 0
            try lib.check(lib.getNumModelSignatures(model, &count), "LiteRtGetNumModelSignatures")
            var signatures = [(key: String, handle: OpaquePointer?)]()
            for i in 0..<count {
                var s: OpaquePointer?
                var key: UnsafePointer<CChar>?
                try lib.check(lib.getModelSignature(model, i, &s), "LiteRtGetModelSignature")
                try lib.check(lib.getSignatureKey(s, &key), "LiteRtGetSignatureKey")
                signatures.append((key.map { String(cString: $0) } ?? "", s))
            }
            signatureKeys = signatures.map(\.key)
            var types = [String: [RankedTensorType]]()  // the library's own type structs, for the buffers
            let bindings = try SignatureBinding.bind(entry, keys: signatureKeys) { key in
                let s = signatures.first { $0.key == key }!.handle
                let (inputs, inTypes) = try Self.tensors(lib, s, input: true)
                let (outputs, outTypes) = try Self.tensors(lib, s, input: false)
                types[key] = inTypes + outTypes
                return (inputs, outputs)
            }
            try lib.check(lib.createOptions(&options), "LiteRtCreateOptions")
            try lib.check(lib.setOptionsHardwareAccelerators(options, LiteRtLibrary.hwAcceleratorCpu),
                          "LiteRtSetOptionsHardwareAccelerators")
            let toml = "num_threads = \(threads)\nweight_cache_file_path = \"\(EdgeM3Contract.inMemoryWeightCache)\"\n"
            var cpu: OpaquePointer?
            try lib.check(lib.createOpaqueOptions(LiteRtLibrary.cpuOptionsIdentifier, strdup(toml),
                                                  { free($0) }, &cpu), "LiteRtCreateOpaqueOptions")
            try lib.check(lib.addOpaqueOptions(options, cpu), "LiteRtAddOpaqueOptions")  // options own it now
            try lib.check(lib.createCompiledModel(environment, model, options, &compiled),
                          "cannot compile \(modelPath) for the CPU")
            for (index, s) in signatures.enumerated() {
                guard let binding = bindings[s.key], let t = types[s.key] else { continue }
                let buffers = try t.map { try makeBuffer($0) }
                slots[s.key] = Slot(index: index, binding: binding, inputs: Array(buffers.prefix(binding.inputs.count)),
                                    outputs: Array(buffers.dropFirst(binding.inputs.count)))
            }
        } catch {
            release()
            throw error
        }
    }

    /// A signature's inputs or outputs as the model declares them, with the library's type structs.
    private static func tensors(_ lib: LiteRtLibrary, _ s: OpaquePointer?, input: Bool) throws -> ([TensorSpec], [RankedTensorType]) {
        var n = 0
        try lib.check(input ? lib.getNumSignatureInputs(s, &n) : lib.getNumSignatureOutputs(s, &n), "signature tensor count")
        var tensors = [TensorSpec]()
        var types = [RankedTensorType]()
        for i in 0..<n {
            var name: UnsafePointer<CChar>?
            var tensor: OpaquePointer?
            try lib.check(input ? lib.getSignatureInputName(s, i, &name) : lib.getSignatureOutputName(s, i, &name), "tensor name")
            try lib.check(input ? lib.getSignatureInputTensorByIndex(s, i, &tensor)
                                : lib.getSignatureOutputTensorByIndex(s, i, &tensor), "tensor")
            var type = RankedTensorType()
            try type.bytes.withUnsafeMutableBytes { try lib.check(lib.getRankedTensorType(tensor, $0.baseAddress!), "LiteRtGetRankedTensorType") }
            tensors.append(TensorSpec(name: name.map { String(cString: $0) } ?? "", shape: type.shape, dtype: type.dtype))
            types.append(type)
        }
        return (tensors, types)
    }

    /// A tensor buffer over 64-byte-aligned host memory of ours (4-byte elements: the binding has
    /// checked every tensor is int32 or float32).
    private func makeBuffer(_ type: RankedTensorType) throws -> OpaquePointer? {
        let bytes = max(type.shape.reduce(1, *), 1) * 4
        var raw: UnsafeMutableRawPointer?
        guard posix_memalign(&raw, 64, bytes) == 0, let raw else { throw EdgeM3Error("out of memory for a \(bytes)-byte buffer") }
        memory.append(raw)
        var buffer: OpaquePointer?
        try type.bytes.withUnsafeBytes {
            try library.check(library.createTensorBufferFromHostMemory($0.baseAddress!, raw, bytes, nil, &buffer),
                              "LiteRtCreateTensorBufferFromHostMemory")
        }
        return buffer
    }

    public func run(_ signature: Signature, inputIds: [Int32], attentionMask: [Int32]) throws -> RawOutputs {
        if compiled == nil { throw EdgeM3Error("LiteRtCRunner: closed", kind: .runnerClosed) }
        guard var slot = slots[signature.name] else {
            throw EdgeM3Error("\(signature.name): not a signature of this runner (has \(slots.keys.sorted()))")
        }
        let lib = library
        for (buffer, values) in zip(slot.inputs, try slot.binding.inputValues(inputIds: inputIds, attentionMask: attentionMask)) {
            var addr: UnsafeMutableRawPointer?
            try lib.check(lib.lockTensorBuffer(buffer, &addr, LiteRtLibrary.lockWrite), "LiteRtLockTensorBuffer")
            values.withUnsafeBytes { addr!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            try lib.check(lib.unlockTensorBuffer(buffer), "LiteRtUnlockTensorBuffer")
        }
        try lib.check(lib.runCompiledModel(compiled, slot.index, slot.inputs.count, &slot.inputs,
                                           slot.outputs.count, &slot.outputs), "run of \(signature.name)")
        return try slot.binding.rawOutputs { i in
            let count = slot.binding.outputs[i].shape.reduce(1, *)
            var addr: UnsafeMutableRawPointer?
            try lib.check(lib.lockTensorBuffer(slot.outputs[i], &addr, LiteRtLibrary.lockRead), "LiteRtLockTensorBuffer")
            defer { _ = lib.unlockTensorBuffer(slot.outputs[i]) }
            return Array(UnsafeBufferPointer(start: addr!.assumingMemoryBound(to: Float.self), count: count))
        }
    }

    /// Frees the model and its buffers now; a later `run` throws `.runnerClosed`.
    public func close() { release() }

    private func release() {
        for slot in slots.values { (slot.inputs + slot.outputs).forEach(library.destroyTensorBuffer) }
        slots = [:]
        memory.forEach { free($0) }
        memory = []
        if let compiled { library.destroyCompiledModel(compiled) }
        if let options { library.destroyOptions(options) }
        if let model { library.destroyModel(model) }
        if let environment { library.destroyEnvironment(environment) }
        (compiled, options, model, environment) = (nil, nil, nil, nil)
    }

    deinit { release() }
}

nonisolated extension EdgeM3Embedder {
    /// A bundle folder on LiteRT's C API (`library`: LiteRtLibrary of the ai-edge-litert wheel):
    /// the same checks as the app's `init(directory:)` (the model file's size and SHA-256 among
    /// them, before LiteRT reads it), the model on `LiteRtCRunner`.
    public convenience init(directory: URL, liteRt library: LiteRtLibrary, threads: Int = EdgeM3Contract.deviceThreads,
                            checksumMemo: URL? = nil) throws {
        let opened = try EdgeM3Embedder.openBundle(directory: directory, checksumMemo: checksumMemo)
        let runner = try LiteRtCRunner(library: library, modelPath: opened.modelFile.path, model: opened.pipeline.model,
                                       threads: threads)
        self.init(pipeline: opened.pipeline, tokenizer: opened.tokenizer, runner: runner)
    }

    /// `init(options:)` on LiteRT's C API: the source, threads and checksum memo as `options` say;
    /// the weights always packed once in memory (the weight cache option is the phone's).
    public convenience init(options: EdgeM3Options, liteRt library: LiteRtLibrary) throws {
        try options.validate()
        try self.init(directory: options.source.resolve(), liteRt: library, threads: options.threads,
                      checksumMemo: options.checksumMemo)
    }
}
#endif  // os(macOS) || os(Linux)
