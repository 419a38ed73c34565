// JVM-only CI check (not part of the app): the Android side of the kit (EdgeM3Embedder,
// ModelRunners.kt: CompiledModelRunner and TfliteRunner) run on this JVM against the stand-ins in
// jvm/stubs/ (LiteRT 2.2.0's Kotlin API, TF Lite's Interpreter, Android's AssetManager), whose
// "native" side is a backend on LiteRT's C API (LiteRtCRunner through JNA) for the bundle's own
// model. Tests: tests/test_kits.py (test_android_runners_*).
//
//   java -cp kit.jar:jna.jar dev.edgem3.AndroidCheckKt missing BUNDLE WORK
//   java -cp kit.jar:jna.jar dev.edgem3.AndroidCheckKt live BUNDLE WORK LIBLITERT [--mismatch NAME DIR]... [--garbage DIR]
//   java -cp kit.jar:jna.jar dev.edgem3.AndroidCheckKt api BUNDLE WORK LIBLITERT
//
// missing: no backend, so the stand-ins' class initializers fail to load their JNI library as the
// real ones do on a device without it: every open must be one EdgeM3RuntimeMissingException.
// live: every way of opening the model (fromDirectory with and without a weight cache, fromAssets
// copying to a file, to memory, or mapping the asset) embeds texts exactly as the desktop runner;
// each --mismatch bundle (manifest.json edited) must be refused with EdgeM3ModelMismatchException
// by both runners, a --garbage bundle with an EdgeM3Exception; a closed embedder refuses with
// EdgeM3ClosedException. api (jvm/ApiCheck.kt): the options builder, the batch, cancellation
// (coroutine and thread), close() during a running embed, and the typed error kinds. One line per case, "case NAME: ok" or "case NAME: FAIL ...", then
// "android: N passed, M failed". Exit 0 all passed, 1 some failed, 2 bad usage.
package dev.edgem3

import android.content.Context
import android.content.res.AssetManager
import edgem3.standin.StandInBackend
import edgem3.standin.StandInModel
import edgem3.standin.StandInRuntime
import edgem3.standin.StandInSignature
import edgem3.standin.StandInTensor
import edgem3.standin.StandInUnreadable
import java.io.File
import java.nio.ByteBuffer
import java.nio.ByteOrder
import java.security.MessageDigest
import kotlin.system.exitProcess

private val TEXTS = listOf("BGE-M3 on a phone.", "Le modèle tourne sur le téléphone.", "x ".repeat(300))

/** The bundle's own model on LiteRT's C API: what the stand-ins' JNI calls reach. */
internal class LiteRtBackend(private val lib: String, private val truth: LocalBundle) : StandInBackend {
    override fun open(bytes: ByteBuffer): StandInModel {
        val digest = MessageDigest.getInstance("SHA-256")
        digest.update(bytes.duplicate().also { it.rewind() })
        if (ModelCheck.hex(digest) != truth.modelEntry.sha256) throw StandInUnreadable("not a model this backend knows")
        val signatures = truth.model.signatures  // LiteRtCRunner.open checks them against the model's own
        val runner = LiteRtCRunner.open(lib, truth.modelFile, signatures)
        fun tensors(ts: List<TensorSpec>) = ts.map { StandInTensor(it.name, it.shape, it.dtype) }
        return StandInModel(signatures.map { StandInSignature(it.name, tensors(it.inputs), tensors(it.outputs)) },
            run = { key, inputs ->
                val s = signatures.first { it.name == key }
                fun ints(b: ByteArray?): IntArray {
                    val view = ByteBuffer.wrap(b ?: ByteArray(0)).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer()
                    return IntArray(view.remaining()).also { view.get(it) }
                }
                val raw = runner.run(s, ints(inputs[EdgeM3Contract.INPUT_IDS]), ints(inputs[EdgeM3Contract.ATTENTION_MASK]))
                val out = HashMap<String, ByteArray>()
                fun put(name: String, rows: List<FloatArray>?) {
                    if (rows == null) return
                    val b = ByteBuffer.allocate(4 * rows.sumOf { it.size }).order(ByteOrder.LITTLE_ENDIAN)
                    for (r in rows) for (v in r) b.putFloat(v)
                    out[name] = b.array()
                }
                put(EdgeM3Contract.DENSE_VECS, raw.denseVecs?.toList())
                put(EdgeM3Contract.SPARSE_WEIGHTS, raw.sparseWeights?.toList())
                put(EdgeM3Contract.COLBERT_VECS, raw.colbertVecs?.flatMap { it.toList() })
                out
            },
            close = { runner.close() })
    }
}

/** A Context over folders: assets packed into a stand-in APK, app folders under `root`. */
internal class FolderContext(root: File, assetRoot: File, compressed: Set<String> = setOf()) : Context() {
    override val assets = AssetManager(assetRoot, compressed)
    override val noBackupFilesDir = File(root, "no_backup").also { it.mkdirs() }
    override val cacheDir = File(root, "cache").also { it.mkdirs() }
    override val packageCodePath: String = assets.apkFile.path
}

internal class Cases {
    var passed = 0
    var failed = 0

    fun case(name: String, check: () -> String?) {
        val problem = try {
            check()
        } catch (exc: Throwable) {
            "threw ${exc.javaClass.name}: ${exc.message}"
        }
        if (problem == null) {
            passed++
            println("case $name: ok")
        } else {
            failed++
            println("case $name: FAIL $problem")
        }
    }

    /**
     * `block` must throw an exception whose class is named `expected` (or a subclass, for
     * EdgeM3Exception) and, given `kind`, whose EdgeM3Failure.kind is it.
     */
    fun throws(name: String, expected: String, contains: String = "", kind: EdgeM3ErrorKind? = null,
               block: () -> Unit) = case(name) {
        try {
            block()
            "no exception, expected $expected"
        } catch (exc: Throwable) {
            val names = generateSequence<Class<*>>(exc.javaClass) { it.superclass }.map { it.simpleName }.toList()
            when {
                expected !in names -> "threw ${exc.javaClass.name}: ${exc.message}; expected $expected"
                contains !in (exc.message ?: "") -> "message \"${exc.message}\" lacks \"$contains\""
                kind != null && (exc as? EdgeM3Failure)?.kind != kind -> "kind ${(exc as? EdgeM3Failure)?.kind}, expected $kind"
                else -> null
            }
        }
    }
}

internal fun same(a: Embedding, b: Embedding): String? = when {
    !a.inputIds.contentEquals(b.inputIds) -> "input_ids differ"
    a.signature != b.signature -> "signature ${a.signature} vs ${b.signature}"
    !java.util.Arrays.equals(a.denseVecs, b.denseVecs) -> "dense_vecs differ"
    a.lexicalWeights != b.lexicalWeights -> "lexical_weights differ"
    !java.util.Arrays.deepEquals(a.colbertVecs, b.colbertVecs) -> "colbert_vecs differ"
    else -> null
}

private fun embedsAsDesktop(open: () -> EdgeM3Embedder, want: List<Embedding>): String? {
    val e = open()
    try {
        for ((i, text) in TEXTS.withIndex()) same(e.embedBlocking(text), want[i])?.let { return "text $i: $it" }
    } finally {
        e.close()
    }
    return null
}

private fun missing(bundle: File, work: File, cases: Cases) {
    // Twice each: the first use fails to load the library, later ones find the class unusable.
    for (round in 1..2) {
        cases.throws("missing-runtime-compiled-$round", "EdgeM3RuntimeMissingException", kind = EdgeM3ErrorKind.RUNTIME_MISSING) {
            EdgeM3Embedder.fromDirectory(bundle, checksumMemo = null).close()
        }
        cases.throws("missing-runtime-interpreter-$round", "EdgeM3RuntimeMissingException") {
            EdgeM3Embedder.fromDirectory(bundle, weightCache = WeightCache.Off, checksumMemo = null).close()
        }
    }
    val ctx = FolderContext(File(work, "app-missing"), assetFolder(bundle, work))
    cases.throws("missing-runtime-assets-memory", "EdgeM3RuntimeMissingException") {
        EdgeM3Embedder.fromAssets(ctx, modelCopy = ModelCopy.MEMORY).close()
    }
}

/** The bundle as an app's assets/edge_m3/ (golden.json stays out, as `make build` does). */
internal fun assetFolder(bundle: File, work: File): File {
    val root = File(work, "assets")
    val dir = File(root, EdgeM3Contract.ASSET_DIR)
    if (!dir.isDirectory) {
        dir.mkdirs()
        bundle.listFiles()?.filter { it.isFile && it.name != EdgeM3Contract.GOLDEN }?.forEach { it.copyTo(File(dir, it.name)) }
    }
    return root
}

private fun live(bundle: File, work: File, lib: String, mismatches: List<Pair<String, File>>, garbage: File?, cases: Cases) {
    val truth = LocalBundle.open(bundle)
    val want = LiteRtCRunner.open(lib, truth.modelFile, truth.model.signatures).use { r ->
        TEXTS.map { EdgeM3Core.embed(it, truth.manifest, truth.model, truth.tokenizer, r) }
    }
    StandInRuntime.backend = LiteRtBackend(lib, truth)
    val assetRoot = assetFolder(bundle, work)
    val model = truth.model.file
    cases.case("directory-in-memory-cache") { embedsAsDesktop({ EdgeM3Embedder.fromDirectory(bundle, checksumMemo = null) }, want) }
    cases.case("directory-cache-file") {
        embedsAsDesktop({ EdgeM3Embedder.fromDirectory(bundle, weightCache = WeightCache.InFile(File(work, "wc"), "k"),
            checksumMemo = null) }, want)
    }
    cases.case("directory-interpreter") {
        embedsAsDesktop({ EdgeM3Embedder.fromDirectory(bundle, weightCache = WeightCache.Off, checksumMemo = null) }, want)
    }
    val fileCtx = FolderContext(File(work, "app-file"), assetRoot)
    cases.case("assets-copy-to-file") {
        embedsAsDesktop({ EdgeM3Embedder.fromAssets(fileCtx) }, want) ?: run {
            val copies = File(fileCtx.noBackupFilesDir, "${EdgeM3Contract.ASSET_DIR}/models").listFiles()?.map { it.name }
            if (copies?.size == 1 && copies[0].endsWith(model)) null else "expected one copy of $model, found $copies"
        }
    }
    val memCtx = FolderContext(File(work, "app-memory"), assetRoot)
    cases.case("assets-copy-to-memory") {
        embedsAsDesktop({ EdgeM3Embedder.fromAssets(memCtx, modelCopy = ModelCopy.MEMORY) }, want)
            ?: if (File(memCtx.noBackupFilesDir, "${EdgeM3Contract.ASSET_DIR}/models").exists()) "a copy was written to disk" else null
    }
    val offCtx = FolderContext(File(work, "app-off"), assetRoot)
    cases.case("assets-mapped-interpreter") { embedsAsDesktop({ EdgeM3Embedder.fromAssets(offCtx, weightCache = WeightCache.Off) }, want) }
    val zipped = FolderContext(File(work, "app-compressed"), assetRoot, setOf("${EdgeM3Contract.ASSET_DIR}/$model"))
    cases.throws("assets-compressed-mapped", "EdgeM3Exception", "noCompress") {
        EdgeM3Embedder.fromAssets(zipped, weightCache = WeightCache.Off).close()
    }
    cases.throws("assets-compressed-memory", "EdgeM3Exception", "noCompress") {
        EdgeM3Embedder.fromAssets(zipped, modelCopy = ModelCopy.MEMORY).close()
    }
    val closing = EdgeM3Embedder.fromDirectory(bundle, checksumMemo = null)
    closing.close()
    closing.close()
    cases.throws("closed-embed", "EdgeM3ClosedException", kind = EdgeM3ErrorKind.RUNNER_CLOSED) { closing.embedBlocking("hello") }
    cases.throws("closed-embed-ids", "EdgeM3ClosedException", kind = EdgeM3ErrorKind.RUNNER_CLOSED) {
        closing.embedIdsBlocking(intArrayOf(0, 2))
    }
    for ((name, dir) in mismatches) {
        cases.throws("mismatch-$name-compiled", "EdgeM3ModelMismatchException", kind = EdgeM3ErrorKind.SIGNATURE_MISMATCH) {
            EdgeM3Embedder.fromDirectory(dir, checksumMemo = null).close()
        }
        cases.throws("mismatch-$name-interpreter", "EdgeM3ModelMismatchException", kind = EdgeM3ErrorKind.SIGNATURE_MISMATCH) {
            EdgeM3Embedder.fromDirectory(dir, weightCache = WeightCache.Off, checksumMemo = null).close()
        }
    }
    if (garbage != null) {
        cases.throws("garbage-compiled", "EdgeM3RuntimeFailedException", model, EdgeM3ErrorKind.RUNTIME_FAILED) { EdgeM3Embedder.fromDirectory(garbage, checksumMemo = null).close() }
        cases.throws("garbage-interpreter", "EdgeM3RuntimeFailedException", "not a model LiteRT can read",
            EdgeM3ErrorKind.RUNTIME_FAILED) {
            EdgeM3Embedder.fromDirectory(garbage, weightCache = WeightCache.Off, checksumMemo = null).close()
        }
    }
}

fun main(args: Array<String>) {
    val usage = "usage: AndroidCheck missing BUNDLE WORK | live BUNDLE WORK LIBLITERT [--mismatch NAME DIR]... " +
        "[--garbage DIR] | api BUNDLE WORK LIBLITERT"
    if (args.size < 3 || args[0] !in listOf("missing", "live", "api") || (args[0] != "missing" && args.size < 4)) {
        System.err.println(usage)
        exitProcess(2)
    }
    val bundle = File(args[1])
    val work = File(args[2]).also { it.mkdirs() }
    val cases = Cases()
    if (args[0] == "missing") {
        missing(bundle, work, cases)
    } else if (args[0] == "api") {
        apiChecks(bundle, work, args[3], cases)
    } else {
        val mismatches = ArrayList<Pair<String, File>>()
        var garbage: File? = null
        var i = 4
        while (i < args.size) {
            when {
                args[i] == "--mismatch" && i + 2 < args.size -> { mismatches.add(args[i + 1] to File(args[i + 2])); i += 3 }
                args[i] == "--garbage" && i + 1 < args.size -> { garbage = File(args[i + 1]); i += 2 }
                else -> { System.err.println(usage); exitProcess(2) }
            }
        }
        live(bundle, work, args[3], mismatches, garbage, cases)
    }
    println("android: ${cases.passed} passed, ${cases.failed} failed")
    exitProcess(if (cases.failed == 0) 0 else 1)
}
