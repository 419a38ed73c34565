package dev.edgem3

import java.io.File
import java.io.FileInputStream

/**
 * A bundle folder on disk, read and checked for a runner: manifest.json, the tokenizer of its kind
 * (and vocab_map.json when trimmed), and every file the manifest lists against its size and SHA-256
 * (`ModelCheck`; with `checksumMemo` a file's hash is checked once). Plain JVM: the Android
 * embedder (`EdgeM3Embedder.fromDirectory`) and the desktop tools (jvm/KitEmbed.kt) share it.
 */
class LocalBundle(val dir: File, val manifest: Manifest, val model: ModelEntry, val tokenizer: EdgeM3Tokenizer) {
    /** The model file; `modelEntry`: its manifest entry (sha256 names the weight cache). */
    val modelFile: File get() = File(dir, model.file)
    val modelEntry: FileEntry get() = manifest.files.getValue(model.file)

    companion object {
        fun open(dir: File, checksumMemo: File? = null): LocalBundle {
            val manifestFile = File(dir, EdgeM3Contract.MANIFEST)
            if (!manifestFile.isFile) throw EdgeM3Exception("$dir: not a bundle (no ${EdgeM3Contract.MANIFEST})")
            val manifest = Manifest.fromJson(readJsonFile(manifestFile))
            val model = manifest.model("tflite")
            if (manifest.files[model.file] == null) throw EdgeM3Exception("$manifestFile: no files entry for ${model.file}")
            for ((name, entry) in manifest.files) {
                val f = File(dir, name)
                if (!f.isFile) throw EdgeM3CorruptBundleException("$f: not found (listed in ${EdgeM3Contract.MANIFEST})")
                ModelCheck.verify(f.path, entry, f.length(), f.lastModified(), checksumMemo) { FileInputStream(f) }
            }
            return LocalBundle(dir, manifest, model, tokenizer(dir, manifest.tokenizer))
        }

        /** The tokenizer of the manifest's kind over the bundle folder's files (EdgeM3Tokenizer.open). */
        fun tokenizer(dir: File, spec: TokenizerSpec): EdgeM3Tokenizer = EdgeM3Tokenizer.open(spec) { name ->
            val f = File(dir, name)
            if (!f.isFile) throw EdgeM3CorruptBundleException("$f: not found (named by ${EdgeM3Contract.MANIFEST})")
            f.readBytes()
        }

        /** A JSON file through MiniJson; a missing file names itself. */
        fun readJsonFile(file: File): Any? {
            if (!file.isFile) throw EdgeM3Exception("$file: not found")
            return MiniJson.parse(file.readText(Charsets.UTF_8))
        }
    }
}
