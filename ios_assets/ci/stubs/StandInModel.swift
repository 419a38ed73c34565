import Foundation

// The model both stand-ins replay (TensorFlowLite.swift and LiteRT.swift, each compiled with this
// file into its own module): a real file's signatures as LiteRT reports them, with raw outputs
// recorded from LiteRT on the same file (tests/test_swift_ios_binding.py's _describe writes it).
// Each stand-in maps the dtypes to its own API's types.

/// The stand-in's model, read from the JSON file the environment variable `variable` names.
struct StandInModel {
    struct TensorSpec {
        let key: String, name: String, shape: [Int], dtype: String
        var byteCount: Int { shape.reduce(1, *) * (StandInModel.byteWidths[dtype] ?? 1) }
    }
    struct Recording {
        let inputs: [String: [Double]]
        let outputs: [String: [Double]]
    }
    struct Signature {
        let key: String, inputs: [TensorSpec], outputs: [TensorSpec], recordings: [Recording]
    }

    let signatures: [Signature]

    /// numpy's dtype names, bytes per element.
    static let byteWidths = ["bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "float16": 2, "int32": 4,
                             "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8]

    /// Recorded values as the tensor's bytes (int32 and float32; zeros of the right size otherwise).
    static func bytes(_ values: [Double], dtype: String) -> Data {
        switch dtype {
        case "int32": return values.map { Int32($0) }.withUnsafeBufferPointer { Data(buffer: $0) }
        case "float32": return values.map { Float($0) }.withUnsafeBufferPointer { Data(buffer: $0) }
        default: return Data(count: values.count * (byteWidths[dtype] ?? 1))
        }
    }

    static func load(from variable: String) -> StandInModel? {
        guard let path = ProcessInfo.processInfo.environment[variable],
              let data = FileManager.default.contents(atPath: path),
              let root = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any],
              let signatures = root["signatures"] as? [[String: Any]] else { return nil }
        func specs(_ any: Any?) -> [TensorSpec] {
            ((any as? [[String: Any]]) ?? []).map {
                TensorSpec(key: $0["key"] as? String ?? "", name: $0["name"] as? String ?? "",
                           shape: $0["shape"] as? [Int] ?? [], dtype: $0["dtype"] as? String ?? "")
            }
        }
        return StandInModel(signatures: signatures.map { s in
            Signature(key: s["key"] as? String ?? "", inputs: specs(s["inputs"]), outputs: specs(s["outputs"]),
                      recordings: ((s["recordings"] as? [[String: Any]]) ?? []).map {
                          Recording(inputs: $0["inputs"] as? [String: [Double]] ?? [:],
                                    outputs: $0["outputs"] as? [String: [Double]] ?? [:])
                      })
        })
    }
}
