import Foundation  // rename, strerror: Foundation brings Darwin / Glibc along

/// The writable index's compaction and garbage: the surviving passages written, in logical-row
/// order and stored form, as a new format-1 base folder (`base-<n>/`, an atomic folder write),
/// and what no database references deleted. The base's rows are read through EdgeM3Index's
/// public stored-form API (`denseBytes(row:)`, `posting(_:)`, `colbertBytes(row:)`, ...).
nonisolated struct IndexCompaction {
    /// The index folder.
    let folder: URL
    let dim: Int
    let denseStore: String
    let colbertStore: String
    /// meta `bundle` (NSNull or a dictionary): index.json's `bundle`.
    let bundleJSON: Any

    /// index.json's `edge_m3_version` in a base this kit writes.
    static let writerVersion = "0.1.0"

    /// Writes `segments`' surviving passages as base `base-<generation>` (a killed compaction's
    /// leftover of that name replaced): built under a temporary name, renamed into place, the
    /// folder synced. Returns its folder; nothing is left behind on failure.
    func build(_ segments: IndexSegments, generation: Int) throws -> URL {
        let name = EdgeM3Contract.indexBasePrefix + String(generation)
        let target = folder.appendingPathComponent(name)
        let fm = FileManager.default
        if fm.fileExists(atPath: target.path) { try? fm.removeItem(at: target) }  // garbage of a killed compaction
        let tmp = folder.appendingPathComponent(".\(name).building-\(UUID().uuidString.prefix(8))")
        do {
            try fm.createDirectory(at: tmp, withIntermediateDirectories: false)
            try writeBase(segments, tmp)
            guard rename(tmp.path, target.path) == 0 else {
                throw EdgeM3Error("\(target.path): cannot rename the new base into place (\(String(cString: strerror(errno))))",
                                  kind: .writeFailed)
            }
            syncFolder(folder)
        } catch {
            try? fm.removeItem(at: tmp)
            throw (error as? EdgeM3Error) ?? EdgeM3Error("\(tmp.path): \(error.localizedDescription)", kind: .writeFailed)
        }
        return target
    }

    // ------------------------------------------------------------------ garbage

    /// Deletes what no database references (the caller holds the writer lock): `base-<n>` folders
    /// other than `baseName` (a kill's leftovers, written but never swapped in) and their
    /// half-written temporaries (`.base-<n>.building-*`, `.base-<n>.old-*`), generations up to
    /// `generation` only (a later one may be another process's compaction in progress, or its base
    /// just committed), database temporaries, and a root base once the database has moved on
    /// (its index.json first, then its files).
    func collectGarbage(baseName: String, generation: Int) {
        let fm = FileManager.default
        guard let names = try? fm.contentsOfDirectory(atPath: folder.path) else { return }
        let prefix = EdgeM3Contract.indexBasePrefix
        for name in names {
            let url = folder.appendingPathComponent(name)
            if name.hasPrefix(".\(EdgeM3Contract.indexDb).tmp-") {
                try? fm.removeItem(at: url)
                continue
            }
            let temporary = name.hasPrefix(".") && (name.contains(".building-") || name.contains(".old-"))
            let base = temporary ? String(name.dropFirst().prefix { $0 != "." }) : name
            var isDir: ObjCBool = false
            guard base.hasPrefix(prefix), name != baseName, fm.fileExists(atPath: url.path, isDirectory: &isDir), isDir.boolValue,
                  let g = metaInt(String(base.dropFirst(prefix.count))), g <= generation else { continue }
            try? fm.removeItem(at: url)
        }
        if baseName != "." { deleteBase(".") }
    }

    /// Deletes base `name`: a `base-<n>` folder, or "." the root base's files (index.json first).
    func deleteBase(_ name: String) {
        let fm = FileManager.default
        if name == "" { return }
        if name != "." {
            try? fm.removeItem(at: folder.appendingPathComponent(name))
            return
        }
        let manifest = folder.appendingPathComponent(EdgeM3Contract.indexManifest)
        var listed = [EdgeM3Contract.indexIds] + EdgeM3Contract.indexArrays.values.sorted()
        if let data = fm.contents(atPath: manifest.path),
           let files = ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?["files"] as? [String: Any] {
            listed += files.keys.filter { !$0.contains("/") && $0 != ".." && $0 != EdgeM3Contract.indexDb }
        }
        try? fm.removeItem(at: manifest)
        for f in Set(listed) { try? fm.removeItem(at: folder.appendingPathComponent(f)) }
    }

    // ------------------------------------------------------------------ the base's files

    /// The surviving passages as a format-1 folder in `out` (docs/index-format.md "The index
    /// folder"), their stored bytes copied (never quantized again), index.json last.
    private func writeBase(_ seg: IndexSegments, _ out: URL) throws {
        var files = BaseFiles(out)
        let n = seg.rows
        try writeDense(seg, &files)
        try writeSparse(seg, &files)
        if colbertStore != "none" { try writeColbert(seg, &files) }
        // ids.json (json.dumps(ids, ensure_ascii=False)), then index.json (json.dumps(manifest, indent=1))
        try files.file(EdgeM3Contract.indexIds) { w in
            var text = "["
            for i in 0..<n {
                if i > 0 { text += ", " }
                switch seg.idOf(i) {
                case .int(let v): text += String(v)
                case .string(let s): text += jsonString(s, asciiOnly: false)
                }
                if text.utf8.count > 1 << 16 {
                    try w.write(Array(text.utf8))
                    text = ""
                }
            }
            try w.write(Array((text + "]").utf8))
        }
        let manifest = self.manifest(count: n, arrays: files.arrays, sizes: files.sizes)
        try files.file(EdgeM3Contract.indexManifest) { try $0.write(Array((manifest.text(indent: 1, level: 0) + "\n").utf8)) }
    }

    private func writeDense(_ seg: IndexSegments, _ files: inout BaseFiles) throws {
        let int8Dense = denseStore == "int8", base = seg.base
        try files.file(EdgeM3Contract.indexArrays["dense"]!) { w in
            for r in seg.survivors { try w.write(base!.denseBytes(row: r)) }
            for p in seg.passages { try w.write(p.denseBlob) }
        }
        files.arrays.append(("dense", int8Dense ? "int8" : "float32", [seg.rows, dim]))
        if int8Dense {
            try files.file(EdgeM3Contract.indexArrays["dense_scale"]!) { w in
                for r in seg.survivors { try w.write(value: base!.denseScaleOf(row: r)!) }
                for p in seg.passages { try w.write(value: p.denseScale) }
            }
            files.arrays.append(("dense_scale", "float32", [seg.rows]))
        }
    }

    /// The postings by token ascending, rows ascending within a token: the base's (surviving rows
    /// renumbered) merged with the added chunks'.
    private func writeSparse(_ seg: IndexSegments, _ files: inout BaseFiles) throws {
        let s0 = seg.survivors.count, base = seg.base
        var dbPostings: [Int32: [(Int32, Float)]] = [:]
        for (j, p) in seg.passages.enumerated() {
            for (t, w) in zip(p.tokens, p.weights) { dbPostings[t, default: []].append((Int32(s0 + j), w)) }
        }
        var newRow = [Int32](repeating: -1, count: base?.count ?? 0)
        for (i, r) in seg.survivors.enumerated() { newRow[r] = Int32(i) }
        var tokens: [Int32] = [], offsets: [Int64] = [0], rows: [Int32] = [], weights: [Float] = []
        let dbTokens = dbPostings.keys.sorted()
        var bt = 0, dt = 0
        let baseTokens = base?.sparseTokenCount ?? 0
        while bt < baseTokens || dt < dbTokens.count {
            let posting = bt < baseTokens ? base!.posting(bt) : nil
            let tb = posting?.token ?? Int32.max
            let td = dt < dbTokens.count ? dbTokens[dt] : Int32.max
            let t = min(tb, td)
            let before = rows.count
            if let posting, tb == t {
                for (r, w) in zip(posting.rows, posting.weights) where newRow[Int(r)] >= 0 {
                    rows.append(newRow[Int(r)])
                    weights.append(w)
                }
                bt += 1
            }
            if dt < dbTokens.count && td == t {
                for (r, w) in dbPostings[t]! {
                    rows.append(r)
                    weights.append(w)
                }
                dt += 1
            }
            if rows.count > before {
                tokens.append(t)
                offsets.append(Int64(rows.count))
            }
        }
        try files.file(EdgeM3Contract.indexArrays["sparse_tokens"]!) { try $0.write(array: tokens) }
        try files.file(EdgeM3Contract.indexArrays["sparse_offsets"]!) { try $0.write(array: offsets) }
        try files.file(EdgeM3Contract.indexArrays["sparse_rows"]!) { try $0.write(array: rows) }
        try files.file(EdgeM3Contract.indexArrays[EdgeM3Contract.indexPostingWeights]!) { try $0.write(array: weights) }
        files.arrays += [("sparse_tokens", "int32", [tokens.count]), ("sparse_offsets", "int64", [offsets.count]),
                         ("sparse_rows", "int32", [rows.count]), (EdgeM3Contract.indexPostingWeights, "float32", [weights.count])]
    }

    private func writeColbert(_ seg: IndexSegments, _ files: inout BaseFiles) throws {
        let int8 = colbertStore == "int8", base = seg.base
        var colOffsets: [Int64] = [0]
        for r in seg.survivors { colOffsets.append(colOffsets.last! + Int64(base!.colbertVectors(row: r).count)) }
        for p in seg.passages { colOffsets.append(colOffsets.last! + Int64(p.colbertRows)) }
        let v = Int(colOffsets.last!)
        try files.file(EdgeM3Contract.indexArrays["colbert_offsets"]!) { try $0.write(array: colOffsets) }
        try files.file(EdgeM3Contract.indexArrays["colbert"]!) { w in
            // a row without vectors writes nothing (an empty colbert.bin maps no pointer)
            for r in seg.survivors { try w.write(base!.colbertBytes(row: r).vectors) }
            for p in seg.passages { try w.write(p.colbertBlob ?? []) }
        }
        files.arrays += [("colbert_offsets", "int64", [seg.rows + 1]), ("colbert", int8 ? "int8" : "float16", [v, dim])]
        if int8 {
            try files.file(EdgeM3Contract.indexArrays["colbert_scale"]!) { w in
                for r in seg.survivors { try w.write(base!.colbertBytes(row: r).scales) }
                for p in seg.passages { try w.write(p.colbertScaleBlob ?? []) }
            }
            files.arrays.append(("colbert_scale", "float32", [v]))
        }
    }

    /// index.json, its keys in Index.save's order.
    private func manifest(count n: Int, arrays: [(String, String, [Int])], sizes: [String: (String, Int)]) -> JSONValue {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        var bundleValue: JSONValue = .null
        if let b = bundleJSON as? [String: Any] {
            let order = EdgeM3Contract.indexBundleKeys + ["quant", "path"]
            let keys = order.filter { b[$0] != nil } + b.keys.filter { !order.contains($0) }.sorted()
            bundleValue = .object(keys.map { ($0, .string(b[$0] as? String ?? "\(b[$0]!)")) })
        }
        return .object([
            ("format", .string(EdgeM3Contract.indexFormat)), ("format_version", .int(EdgeM3Contract.indexFormatVersion)),
            ("edge_m3_version", .string(IndexCompaction.writerVersion)),
            ("created", .string(formatter.string(from: Date()))), ("bundle", bundleValue),
            ("count", .int(n)), ("dim", .int(dim)), ("dense", .string(denseStore)), ("colbert", .string(colbertStore)),
            ("arrays", .object(arrays.map { name, dtype, shape in
                (name, .object([("file", .string(EdgeM3Contract.indexArrays[name]!)), ("dtype", .string(dtype)),
                                ("shape", .array(shape.map { .int($0) }))]))
            })),
            ("files", .object(sizes.keys.sorted().map { ($0, .object([("sha256", .string(sizes[$0]!.0)), ("size", .int(sizes[$0]!.1))])) })),
        ])
    }
}

/// A base folder being written: each file's sha256 and size, the arrays in Index.save's order.
nonisolated private struct BaseFiles {
    let out: URL
    var arrays: [(String, String, [Int])] = []  // name, dtype, shape
    var sizes: [String: (String, Int)] = [:]  // file -> sha256, size

    init(_ out: URL) { self.out = out }

    mutating func file(_ name: String, _ fill: (inout BinWriter) throws -> Void) throws {
        var w = try BinWriter(out.appendingPathComponent(name))
        try fill(&w)
        sizes[name] = try w.close()
    }
}
