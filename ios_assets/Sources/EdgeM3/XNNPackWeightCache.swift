import Foundation

// Where XNNPACK keeps the packed weights, for every phone runner (TFLiteRunner.swift on
// TensorFlowLiteSwift, LiteRTRunner.swift on LiteRT's Swift package): the same file names, the
// same one-open-at-a-time lock, the same retry, the same temporary file on Apple platforms.
// Public because a runner file may sit in the app target beside the EdgeM3 package (README).

nonisolated extension EdgeM3WeightCache {
    /// Opens a model with the XNNPACK weight cache this case names: `body(path, scratch)` gets the
    /// cache path to give XNNPACK (nil for `.off`: the runtime's own XNNPACK, no cache) and, on
    /// Apple platforms for `.memory`, the temporary file behind it, which the caller deletes when
    /// the runtime lets go of it (deleted here if `body` throws). `.file` needs `modelSha256`
    /// (the manifest's) to name the file; without it, `.memory`. A `.file` open that fails is
    /// tried once more on a fresh file (a cache file cut short by a crash).
    public func open<T>(modelSha256: String?, _ body: (_ cachePath: String?, _ scratch: URL?) throws -> T) throws -> T {
        switch (self, modelSha256) {
        case (.off, _):
            return try body(nil, nil)
        case (.file(let directory), let sha?):
            let file = try Self.cacheFile(in: directory, modelSha256: sha)
            // XNNPACK truncates a cache file it cannot load, so a second runner must not start on
            // the file while the first is still writing it: one open at a time in the process.
            Self.openLock.lock()
            defer { Self.openLock.unlock() }
            do {
                return try body(file.path, nil)
            } catch {
                try? FileManager.default.removeItem(at: file)
                return try body(file.path, nil)
            }
        case (.file, nil), (.memory, _):
            #if os(Linux) || os(Android)
            return try body(EdgeM3Contract.inMemoryWeightCache, nil)
            #else
            // XNNPACK's in-memory cache needs memfd_create (Linux, Android): elsewhere a
            // temporary file, deleted with the runtime's delegate.
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
                EdgeM3Contract.assetDir + "-" + UUID().uuidString + EdgeM3Contract.weightCacheSuffix)
            do {
                return try body(scratch.path, scratch)
            } catch {
                try? FileManager.default.removeItem(at: scratch)
                throw error
            }
            #endif
        }
    }

    private static let openLock = NSLock()

    /// The cache file for this model and app build, in `directory` (created). Files of other
    /// app builds are deleted (as the Android kit does): packed weights are found by buffer
    /// index, so a file is valid only for the runtime that wrote it.
    static func cacheFile(in directory: URL, modelSha256: String) throws -> URL {
        let fm = FileManager.default
        try fm.createDirectory(at: directory, withIntermediateDirectories: true)
        let name = EdgeM3Contract.weightCacheName(modelSha256: modelSha256, runtimeKey: appBuildKey)
        let thisBuild = String(name.dropFirst(EdgeM3Contract.weightCacheKeyChars))  // "-<key>.xnnpack_cache"
        for old in (try? fm.contentsOfDirectory(atPath: directory.path)) ?? []
        where old.hasSuffix(EdgeM3Contract.weightCacheSuffix) && !old.hasSuffix(thisBuild) {
            try? fm.removeItem(at: directory.appendingPathComponent(old))
        }
        return directory.appendingPathComponent(name)
    }

    /// Changes with every app build, and so with the runtime linked into it: version, build
    /// number and the executable's modification time.
    static var appBuildKey: String {
        let info = Bundle.main.infoDictionary ?? [:]
        let version = info["CFBundleShortVersionString"] as? String ?? "0"
        let build = info["CFBundleVersion"] as? String ?? "0"
        let built = Bundle.main.executableURL.flatMap {
            (try? FileManager.default.attributesOfItem(atPath: $0.path))?[.modificationDate] as? Date
        }
        return "\(version)-\(build)-\(Int(built?.timeIntervalSince1970 ?? 0))"
    }
}
