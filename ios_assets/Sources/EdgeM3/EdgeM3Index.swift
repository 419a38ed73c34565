import Foundation  // mmap, open, fstat: Foundation brings Darwin / Glibc along

/// A passage index written by `edge-m3 index` (docs/index-format.md), memory-mapped in place: the
/// arrays are read straight from the page cache, nothing is copied or parsed but `index.json` and
/// `ids.json`. `search` returns the same hits and float64 scores as Python's `edge_m3.retrieval`
/// on the same index and query (docs/index-format.md "Search"), because both follow one text.
///
/// Immutable after `init`, so safe to share between threads. Blocking: open it off the main
/// thread (the SHA-256 of every file is read once unless `verifySHA256` is false).
nonisolated public final class EdgeM3Index: @unchecked Sendable {
    /// One search result: the row (see `ids`), its chunk number in its passage (see `chunks`)
    /// and its score. A passage search's hit is the passage's best chunk.
    public struct Hit: Hashable, Sendable {
        public let row: Int
        public let chunk: Int
        public let score: Double
    }

    /// A passage id from ids.json: a string or an integer.
    public enum PassageID: Hashable, Sendable {
        case string(String)
        case int(Int64)
    }

    public let folder: URL
    /// Passages (rows).
    public let count: Int
    /// Vector width: the bundle's hidden size.
    public let dim: Int
    /// `float32` or `int8`.
    public let denseStore: String
    /// `fp16`, `int8` or `none`.
    public let colbertStore: String
    /// Passage id per row. Rows that share an id are the chunks of one passage.
    public let ids: [PassageID]
    /// Chunk number per row: how many rows before it have its id (docs/index-format.md,
    /// "Passages and chunks"); all 0 when no id repeats.
    public let chunks: [Int]
    /// The largest number of chunks of one passage (0 for an empty index).
    public let maxChunks: Int
    /// index.json's `bundle` entry's strings (`model_file`, `model_sha256`, `tokenizer_file`, ...); empty when it records none.
    public let bundle: [String: String]

    // The mapped arrays: private (EdgeM3WritableIndex reads a base through the public scoring
    // and stored-form API below); `sparseTokens` and `tokenCount` internal for the fuzz targets.
    private let files: [MappedFile]  // keeps the mappings alive
    private let dense: UnsafeRawPointer?
    private let denseScale: UnsafePointer<Float>?
    let sparseTokens: UnsafePointer<Int32>?
    let tokenCount: Int
    private let sparseOffsets: UnsafePointer<Int64>
    private let sparseRows: UnsafePointer<Int32>?
    private let sparseWeights: UnsafePointer<Float>?
    private let colbertOffsets: UnsafePointer<Int64>?
    private let colbert: UnsafeRawPointer?
    private let colbertScale: UnsafePointer<Float>?

    /// Opens and checks an index folder: format and version, every file's size and (unless
    /// `verifySHA256` is false, e.g. after a first successful open) SHA-256, the arrays' shapes,
    /// and with `bundleFiles` (the bundle's manifest.json `files`: name -> sha256) that the index
    /// was built by that bundle's model and tokenizer. Any problem: one EdgeM3Error naming the file,
    /// of kind `.corruptIndex` for every refusal of the index's files (`.invalidInput`: another bundle).
    public init(folder: URL, bundleFiles: [String: String]? = nil, verifySHA256: Bool = true) throws {
        self.folder = folder
        let manifestName = EdgeM3Contract.indexManifest
        let manifestURL = folder.appendingPathComponent(manifestName)
        let w = manifestURL.path
        guard let data = FileManager.default.contents(atPath: w) else {
            throw EdgeM3Error("\(folder.path): not an index (no \(manifestName))", kind: .corruptIndex)
        }
        guard let tree = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw EdgeM3Error("\(w): corrupt (not a JSON object)", kind: .corruptIndex)
        }
        func field<T>(_ o: [String: Any], _ key: String, _ at: String) throws -> T {
            guard let v = o[key] as? T else { throw EdgeM3Error("\(w): \(at)\(key) missing or of the wrong type", kind: .corruptIndex) }
            return v
        }
        func int(_ o: [String: Any], _ key: String, _ at: String) throws -> Int {
            guard let n = o[key] as? NSNumber, let v = Int(exactly: n.doubleValue) else {
                throw EdgeM3Error("\(w): \(at)\(key) must be an integer", kind: .corruptIndex)
            }
            return v
        }
        let format: String = try field(tree, "format", "")
        guard format == EdgeM3Contract.indexFormat else { throw EdgeM3Error("\(w): format \(format), not \(EdgeM3Contract.indexFormat)", kind: .corruptIndex) }
        let version = try int(tree, "format_version", "")
        guard version == EdgeM3Contract.indexFormatVersion else {
            throw EdgeM3Error("\(w): format_version \(version), this kit reads \(EdgeM3Contract.indexFormatVersion)", kind: .corruptIndex)
        }
        count = try int(tree, "count", "")
        dim = try int(tree, "dim", "")
        guard count >= 0, dim >= 1, dim <= EdgeM3Contract.indexMaxDim else { throw EdgeM3Error("\(w): count \(count), dim \(dim)", kind: .corruptIndex) }
        denseStore = try field(tree, "dense", "")
        colbertStore = try field(tree, "colbert", "")
        guard EdgeM3Contract.denseStores.contains(denseStore) else { throw EdgeM3Error("\(w): dense store \(denseStore) unknown", kind: .corruptIndex) }
        guard EdgeM3Contract.colbertStores.contains(colbertStore) else { throw EdgeM3Error("\(w): colbert store \(colbertStore) unknown", kind: .corruptIndex) }
        // Absent or null: built without a bundle (Python's Index), so queries cannot be checked against
        // one; present, it names the model and tokenizer by strings (as Python's BundleIdentity).
        let rawBundle = tree["bundle"].flatMap { $0 is NSNull ? nil : $0 }
        let bundleKeys = EdgeM3Contract.indexBundleKeys
        if let raw = rawBundle {
            guard let b = raw as? [String: Any], bundleKeys.allSatisfy({ b[$0] is String }) else {
                throw EdgeM3Error("\(folder.path): bundle: needs \(bundleKeys.joined(separator: ", ")) (strings)", kind: .corruptIndex)
            }
        }
        let bundleTree = rawBundle as? [String: Any] ?? [:]
        bundle = bundleTree.compactMapValues { $0 as? String }
        if let bundleFiles {
            guard rawBundle != nil else { throw EdgeM3Error("\(w): records no bundle, so queries cannot be checked against it") }
            for key in ["model", "tokenizer"] {
                let file: String = try field(bundleTree, "\(key)_file", "bundle.")
                let sha: String = try field(bundleTree, "\(key)_sha256", "bundle.")
                guard bundleFiles[file] == sha else {
                    throw EdgeM3Error("\(folder.path): index built by another bundle (\(file) sha256 \(sha.prefix(12))..., "
                        + "the bundle's is \(bundleFiles[file].map { String($0.prefix(12)) } ?? "absent")); rebuild it with edge-m3 index")
                }
            }
        }
        // Every listed file: present, its size, its SHA-256 (mapped, so hashing reads the page cache).
        let fileTree: [String: Any] = try field(tree, "files", "")
        var mapped: [String: MappedFile] = [:]
        for (name, entry) in fileTree.sorted(by: { $0.key < $1.key }) {
            // A control character refused too: every message below names the file (issue 38).
            guard !name.contains("/"), !name.contains("\\"), name != "..", name != manifestName,
                  !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.isWhitespace && $0 != " " }) else {
                throw EdgeM3Error("\(w): bad file name \(name.debugDescription)", kind: .corruptIndex)
            }
            guard let e = entry as? [String: Any] else { throw EdgeM3Error("\(w): files.\(name) must be an object", kind: .corruptIndex) }
            let size = try int(e, "size", "files.\(name).")
            let sha: String = try field(e, "sha256", "files.\(name).")
            let url = folder.appendingPathComponent(name)
            let file = try MappedFile(url)
            guard file.size == size else {
                throw EdgeM3Error("\(url.path): \(file.size) bytes, \(manifestName) says \(size); the index is corrupt", kind: .corruptIndex)
            }
            if verifySHA256 {
                var hasher = StreamingSHA256()
                hasher.update(UnsafeRawBufferPointer(start: file.base, count: file.size))
                let actual = hasher.hexDigest()
                guard actual == sha else {
                    throw EdgeM3Error("\(url.path): sha256 \(actual), \(manifestName) says \(sha); the index is corrupt", kind: .corruptIndex)
                }
            }
            mapped[name] = file
        }
        files = Array(mapped.values)
        let arrays: [String: Any] = try field(tree, "arrays", "")
        let itemSize = ["float32": 4, "float16": 2, "int8": 1, "int32": 4, "int64": 8]

        func array(_ name: String, _ dtype: String, _ shape: [Int]) throws -> UnsafeRawPointer? {
            guard let a = arrays[name] else { return nil }
            guard let o = a as? [String: Any], let file = o["file"] as? String, let got = o["dtype"] as? String,
                  let gotShape = (o["shape"] as? [NSNumber])?.map({ $0.intValue }) else {
                throw EdgeM3Error("\(w): arrays.\(name) needs file, dtype and shape", kind: .corruptIndex)
            }
            guard got == dtype, gotShape == shape else {
                throw EdgeM3Error("\(w): arrays.\(name): \(got) \(gotShape), expected \(dtype) \(shape)", kind: .corruptIndex)
            }
            guard let m = mapped[file] else { throw EdgeM3Error("\(w): arrays.\(name): \(file) is not among the files with a sha256", kind: .corruptIndex) }
            // Checked: a shape of 2^63 (NSNumber's intValue: Int.min) trapped on overflow here (issue 38).
            var bytes = itemSize[dtype]!, overflow = false
            for d in shape {
                let (r, o) = bytes.multipliedReportingOverflow(by: d)
                (bytes, overflow) = (r, overflow || o || d < 0)
            }
            guard !overflow, m.size == bytes else {
                throw EdgeM3Error("\(m.url.path): \(m.size) bytes, shape \(gotShape) needs \(overflow ? "more than \(Int.max)" : String(bytes))", kind: .corruptIndex)
            }
            return m.base
        }
        func required(_ name: String, _ dtype: String, _ shape: [Int]) throws -> UnsafeRawPointer? {
            guard arrays[name] != nil else { throw EdgeM3Error("\(w): arrays.\(name) missing", kind: .corruptIndex) }
            return try array(name, dtype, shape)
        }
        func length(_ name: String) throws -> Int {
            guard let o = arrays[name] as? [String: Any], let n = (o["shape"] as? [NSNumber])?.first?.intValue else {
                throw EdgeM3Error("\(w): arrays.\(name) missing", kind: .corruptIndex)
            }
            // Past Int32 no file here holds it (and n + 1 must not overflow): refused, as by Python and Kotlin.
            guard n >= 0, n <= Int(Int32.max) else { throw EdgeM3Error("\(w): arrays.\(name).shape \(n) out of range", kind: .corruptIndex) }
            return n
        }

        let int8Dense = denseStore == "int8"
        // Only the arrays the stores use (docs/index-format.md): a stray one would be read by one
        // reader and not another (issue 38).
        var used: Set<String> = ["dense", "sparse_tokens", "sparse_offsets", "sparse_rows", EdgeM3Contract.indexPostingWeights]
        if int8Dense { used.insert("dense_scale") }
        if colbertStore != "none" { used.formUnion(["colbert_offsets", "colbert"]) }
        if colbertStore == "int8" { used.insert("colbert_scale") }
        if let stray = arrays.keys.sorted().first(where: { !used.contains($0) }) {
            throw EdgeM3Error("\(w): arrays.\(stray.debugDescription) is not used by the \(denseStore)/\(colbertStore) stores; "
                              + "refusing a corrupt index", kind: .corruptIndex)
        }
        dense = try required("dense", int8Dense ? "int8" : "float32", [count, dim])
        denseScale = int8Dense ? try required("dense_scale", "float32", [count])?.assumingMemoryBound(to: Float.self) : nil
        let t = try length("sparse_tokens"), p = try length("sparse_rows")
        tokenCount = t
        let tokens = try required("sparse_tokens", "int32", [t])?.assumingMemoryBound(to: Int32.self)
        guard let offsets = try required("sparse_offsets", "int64", [t + 1])?.assumingMemoryBound(to: Int64.self) else {
            throw EdgeM3Error("\(folder.path)/sparse_offsets: empty; the index is corrupt", kind: .corruptIndex)
        }
        let postRows = try required("sparse_rows", "int32", [p])?.assumingMemoryBound(to: Int32.self)
        sparseWeights = try required(EdgeM3Contract.indexPostingWeights, "float32", [p])?.assumingMemoryBound(to: Float.self)
        try EdgeM3Index.checkOffsets(offsets, t + 1, total: p, "\(folder.path)/sparse_offsets")
        for i in 1..<max(t, 1) where tokens![i - 1] >= tokens![i] {
            throw EdgeM3Error("\(folder.path): sparse_tokens not ascending; the index is corrupt", kind: .corruptIndex)
        }
        for i in 0..<p where postRows![i] < 0 || Int(postRows![i]) >= count {
            throw EdgeM3Error("\(folder.path): sparse_rows out of range; the index is corrupt", kind: .corruptIndex)
        }
        for k in 0..<t {  // a posting's rows strictly ascending, as Python's `postings` writes them
            for i in (Int(offsets[k]) + 1)..<max(Int(offsets[k]) + 1, Int(offsets[k + 1])) where postRows![i - 1] >= postRows![i] {
                throw EdgeM3Error("\(folder.path): sparse_rows not ascending within a token; the index is corrupt", kind: .corruptIndex)
            }
        }
        (sparseTokens, sparseOffsets, sparseRows) = (tokens, offsets, postRows)
        if colbertStore != "none" {
            let v = try length("colbert")
            let o = try required("colbert_offsets", "int64", [count + 1])?.assumingMemoryBound(to: Int64.self)
            guard let o else { throw EdgeM3Error("\(folder.path)/colbert_offsets: empty; the index is corrupt", kind: .corruptIndex) }
            try EdgeM3Index.checkOffsets(o, count + 1, total: v, "\(folder.path)/colbert_offsets")
            colbertOffsets = o
            let int8 = colbertStore == "int8"
            colbert = try required("colbert", int8 ? "int8" : "float16", [v, dim])
            colbertScale = int8 ? try required("colbert_scale", "float32", [v])?.assumingMemoryBound(to: Float.self) : nil
        } else {
            (colbertOffsets, colbert, colbertScale) = (nil, nil, nil)
        }
        // Scales are max|x| / 127 (> 0) and weights > 0: anything else is not an index's (issue 38:
        // a negative scale made an error bound negative and a row vanish from Python's hits only).
        // Read in place from the mappings, at every open, as Python's check_layout (retrieval/index_folder.py).
        let vectors = colbertStore == "none" ? 0 : try length("colbert")
        let bad = [("dense_scale", denseScale, count), ("colbert_scale", colbertScale, vectors),
                   (EdgeM3Contract.indexPostingWeights, sparseWeights, p)]
            .filter { !EdgeM3Index.allPositive($0.1, $0.2) }.map { $0.0 }
        if !bad.isEmpty {
            throw EdgeM3Error("\(folder.path): inconsistent arrays (\(bad.joined(separator: ", "))); refusing a corrupt index", kind: .corruptIndex)
        }
        // float32 dense and fp16 ColBERT values finite: checked with the SHA-256 (which read every
        // byte already); an index opened unverified is trusted to hold what a builder writes.
        if verifySHA256, !EdgeM3Index.allFinite(int8Dense ? nil : dense, float32: count * dim)
            || !EdgeM3Index.allFinite(colbertStore == "fp16" ? colbert : nil, float16: vectors * dim) {
            throw EdgeM3Error("\(folder.path): a stored vector is not finite; refusing a corrupt index", kind: .corruptIndex)
        }
        let idsName = EdgeM3Contract.indexIds
        guard let idsFile = mapped[idsName] else { throw EdgeM3Error("\(w): files has no \(idsName)", kind: .corruptIndex) }
        let idsData = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: idsFile.base ?? UnsafeRawPointer(bitPattern: 1)!),
                           count: idsFile.size, deallocator: .none)
        guard let list = (try? JSONSerialization.jsonObject(with: idsData)) as? [Any] else {
            throw EdgeM3Error("\(idsFile.url.path): corrupt (not a JSON array)", kind: .corruptIndex)
        }
        ids = try list.map { x -> PassageID in
            if let s = x as? String { return .string(s) }
            // An integer only (issue 38: -0.0, 1.0 and true were ids 0, 1 and 1 here alone, and an
            // integer past 2^53 was rounded through Double): Foundation's integer encodings.
            if let n = x as? NSNumber, ["q", "l", "i", "s"].contains(String(cString: n.objCType)) { return .int(n.int64Value) }
            // swift-corelibs-foundation reads an integer below about -10^17 as an NSDecimalNumber
            // (objCType "d"), exactly: taken when it is a whole number in Int64's range.
            if let d = x as? NSDecimalNumber, d.compare(NSDecimalNumber(value: d.int64Value)) == .orderedSame {
                return .int(d.int64Value)
            }
            throw EdgeM3Error("\(idsFile.url.path): corrupt (ids must be strings or integers)", kind: .corruptIndex)
        }
        guard ids.count == count else { throw EdgeM3Error("\(idsFile.url.path): \(ids.count) ids, \(manifestName) says \(count)", kind: .corruptIndex) }
        (chunks, maxChunks) = chunkNumbers(ids)
    }


    /// Search with a query embedded by the same bundle (`EdgeM3Embedder.embed`).
    public func search(_ query: Embedding, k: Int, mode: String, weights: [Double] = Retrieval.defaultWeights,
                       chunks: Bool = false) throws -> [Hit] {
        try search(try Retrieval.Vectors(query), k: k, mode: mode, weights: weights, chunks: chunks)
    }

    /// The best `k` passages for `mode`, best first, each hit its passage's best chunk: the row
    /// search below for `k * maxChunks` rows, then the first row of each id (docs/index-format.md,
    /// "Passages and chunks"). `chunks`: the best `k` rows themselves. With no repeated id both
    /// are the same hits.
    public func search(_ query: Retrieval.Vectors, k: Int, mode: String, weights: [Double] = Retrieval.defaultWeights,
                       chunks: Bool = false) throws -> [Hit] {
        let rows = try rowSearch(query, k: chunks ? k : rowsFor(k, passagesOf: maxChunks), mode: mode, weights: weights)
        return (chunks ? rows : firstOfEachPassage(rows, k) { ids[$0] }).map { Hit(row: $0.0, chunk: self.chunks[$0.0], score: $0.1) }
    }

    /// The best `k` rows for `mode`, best first (score descending, then row ascending). `sparse`
    /// hits only rows sharing a token with the query (none: no hits); the hybrid modes re-score
    /// the union of the best `max(k, HYBRID_CANDIDATES)` rows by dense and by sparse.
    private func rowSearch(_ query: Retrieval.Vectors, k: Int, mode: String, weights: [Double]) throws -> [(Int, Double)] {
        let used = try checkQuery(query, k: k, mode: mode, weights: weights, dim: dim, colbertStore: colbertStore)
        if count == 0 { return [] }
        let cq = query.colbert ?? []
        return try rankByMode(k, count, mode: mode, weights: weights, used: used,
                              dense: { denseAll(query.dense ?? []) },
                              sparse: { let s = sparseScores(query.lexical!); return (s.acc, s.rows) },
                              colbert: { colbertScore(cq, $0) })
    }

    /// Every row's dense score by Score arithmetic (float32 values, or int8 codes then * scale).
    public func denseAll(_ query: [Float]) -> [Double] {
        var out = [Double](repeating: 0, count: count)
        guard let dense else { return out }
        let d = dim, n = count
        query.withUnsafeBufferPointer { qb in
            out.withUnsafeMutableBufferPointer { o in
                let q = qb.baseAddress!
                if let scale = denseScale {
                    rowDots(q, dense.assumingMemoryBound(to: Int8.self), d, 0, n, { Double($0) }) { o[$0] = $1 }
                    for i in 0..<n { o[i] = o[i] * Double(scale[i]) }
                } else {
                    rowDots(q, dense.assumingMemoryBound(to: Float.self), d, 0, n, { Double($0) }) { o[$0] = $1 }
                }
            }
        }
        return out
    }

    /// Row `row`'s ColBERT score (0: no vectors on either side).
    public func colbertScore(_ qs: [[Float]], _ row: Int) -> Double {
        guard let offsets = colbertOffsets, let colbert else { return 0 }
        let from = Int(offsets[row]), to = Int(offsets[row + 1])
        if qs.isEmpty || from == to { return 0 }
        let d = dim
        var total = 0.0
        for qv in qs {
            var best = -Double.infinity
            qv.withUnsafeBufferPointer { qb in
                let q = qb.baseAddress!
                if let sc = colbertScale {
                    rowDots(q, colbert.assumingMemoryBound(to: Int8.self), d, from, to, { Double($0) }) { v, acc in
                        let s = acc * Double(sc[v])
                        if s > best { best = s }
                    }
                } else {
                    rowDots(q, colbert.assumingMemoryBound(to: UInt16.self), d, from, to,
                            { Double(halfTable[Int(UInt16(littleEndian: $0))]) }) { _, acc in
                        if acc > best { best = acc }
                    }
                }
            }
            total += best
        }
        return total / Double(qs.count)
    }

    /// Every row's lexical score, whether it shares a token with the query, and those rows ascending.
    public struct SparseScores: Sendable {
        public var acc: [Double]
        public var touched: [Bool]
        public var rows: [Int]
    }

    /// Every row's lexical score through the postings, query tokens in ascending id (the pairwise order).
    public func sparseScores(_ q: Retrieval.Lexical) -> SparseScores {
        var acc = [Double](repeating: 0, count: count)
        var touched = [Bool](repeating: false, count: count)
        var rows: [Int] = []
        guard let tokens = sparseTokens, let postRows = sparseRows, let postWeights = sparseWeights else {
            return SparseScores(acc: acc, touched: touched, rows: rows)
        }
        var t = 0
        for i in 0..<q.ids.count {
            let id = q.ids[i]
            var lo = t, hi = tokenCount
            while lo < hi {
                let mid = (lo + hi) / 2
                if tokens[mid] < id { lo = mid + 1 } else { hi = mid }
            }
            t = lo
            guard t < tokenCount, tokens[t] == id else { continue }
            let w = Double(q.weights[i])
            for p in Int(sparseOffsets[t])..<Int(sparseOffsets[t + 1]) {
                let r = Int(postRows[p])
                if !touched[r] {
                    touched[r] = true
                    rows.append(r)
                }
                acc[r] += w * Double(postWeights[p])
            }
        }
        rows.sort()
        return SparseScores(acc: acc, touched: touched, rows: rows)
    }

    // ---- the stored form, row by row (a compaction copies a base's rows as stored, never re-quantized).
    // The buffers point into the mappings: valid while this index lives.

    /// Row `r`'s dense vector as stored: `dim` float32 values or int8 codes, little-endian.
    public func denseBytes(row r: Int) -> UnsafeRawBufferPointer {
        let item = denseScale == nil ? 4 : 1
        return UnsafeRawBufferPointer(start: dense.map { $0 + r * dim * item }, count: dense == nil ? 0 : dim * item)
    }

    /// Row `r`'s dense scale (int8 store), nil for a float32 store.
    public func denseScaleOf(row r: Int) -> Float? { denseScale?[r] }

    /// Row `r`'s ColBERT vectors: their numbers in the colbert arrays (empty: none, or no ColBERT store).
    public func colbertVectors(row r: Int) -> Range<Int> {
        guard let o = colbertOffsets else { return 0..<0 }
        return Int(o[r])..<Int(o[r + 1])
    }

    /// Row `r`'s ColBERT vectors as stored (float16 bits or int8 codes, [n, dim]) and, int8 store,
    /// their float32 scales; empty when the row has none.
    public func colbertBytes(row r: Int) -> (vectors: UnsafeRawBufferPointer, scales: UnsafeRawBufferPointer) {
        let v = colbertVectors(row: r)
        guard let colbert, !v.isEmpty else { return (UnsafeRawBufferPointer(start: nil, count: 0), UnsafeRawBufferPointer(start: nil, count: 0)) }
        let item = colbertScale == nil ? 2 : 1
        let scales = colbertScale.map { UnsafeRawBufferPointer(start: $0 + v.lowerBound, count: v.count * 4) }
        return (UnsafeRawBufferPointer(start: colbert + v.lowerBound * dim * item, count: v.count * dim * item),
                scales ?? UnsafeRawBufferPointer(start: nil, count: 0))
    }

    /// The postings' tokens, ascending: `posting(_:)` reads the `t`-th, for `t` below this.
    public var sparseTokenCount: Int { tokenCount }

    /// The `t`-th token's postings: its id, its rows ascending and their weights.
    public func posting(_ t: Int) -> (token: Int32, rows: UnsafeBufferPointer<Int32>, weights: UnsafeBufferPointer<Float>) {
        let from = Int(sparseOffsets[t]), n = Int(sparseOffsets[t + 1]) - from
        return (sparseTokens![t], UnsafeBufferPointer(start: sparseRows.map { $0 + from }, count: n),
                UnsafeBufferPointer(start: sparseWeights.map { $0 + from }, count: n))
    }
}
