// JVM-only CI check (not part of the app): the API a mobile developer calls (issue 34), run on this
// JVM, the model on LiteRT's C API (LiteRtCRunner, through the stand-ins for the Android paths):
// the options builder (a folder, the assets, bad options), embed(texts) against one by one (bit for
// bit, blocking and suspending), cancellation before each model call (a cancelled coroutine Job, an
// interrupted thread) with a runner that counts calls and holds one until released, close() while
// an embed runs (it returns at once; the runner goes when the running call returns), the typed error
// kinds (generated from spec.KIT_ERROR_KINDS) each raised by its cause, the ScoreMode enum,
// MiniJson's and JsonTree's refusals with their exact messages (jsonChecks), and the refusals and
// overloads of jvm/RefusalCheck.kt (the writable index, extractAsset, the tokenizers' corrupt files).
// Driven by `AndroidCheck api BUNDLE WORK LIBLITERT` (tests/test_kit_api.py).
package dev.edgem3

import edgem3.standin.StandInBackend
import edgem3.standin.StandInFault
import edgem3.standin.StandInModel
import edgem3.standin.StandInRuntime
import edgem3.standin.StandInSignature
import edgem3.standin.StandInTensor
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.Job
import java.io.File
import java.nio.ByteBuffer
import java.util.concurrent.CountDownLatch
import java.util.concurrent.Semaphore
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicReference
import kotlin.coroutines.Continuation
import kotlin.coroutines.startCoroutine

private val BATCH = listOf("BGE-M3 on a phone.", "Le modèle tourne sur le téléphone.", "x ".repeat(300), "", "Ünïcödé 文字")

/**
 * A runner stand-in: the real one behind it, every call counted; call number `holdAt` (1-based)
 * signals `entered` and waits until `release` (uninterruptibly, as a native model call does).
 */
private class GateRunner(private val real: LoadedModel, private val holdAt: Int = 0) : LoadedModel {
    val calls = AtomicInteger()
    val closes = AtomicInteger()
    val entered = CountDownLatch(1)
    val release = Semaphore(0)

    override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
        if (closes.get() > 0) throw IllegalStateException("run after close")
        val n = calls.incrementAndGet()
        if (n == holdAt) {
            entered.countDown()
            release.acquireUninterruptibly()
        }
        return real.run(signature, inputIds, attentionMask)
    }

    override fun close() {
        closes.incrementAndGet()
        real.close()
    }
}

/** `block` as a coroutine in `job`'s context, on this thread until it first suspends; waits for its end. */
private fun <T> runIn(job: Job, block: suspend () -> T): T {
    val done = CountDownLatch(1)
    val value = AtomicReference<Any?>()
    val error = AtomicReference<Throwable?>()
    block.startCoroutine(Continuation(job) { r ->
        value.set(r.getOrNull())
        error.set(r.exceptionOrNull())
        done.countDown()
    })
    if (!done.await(120, TimeUnit.SECONDS)) throw IllegalStateException("the coroutine did not end")
    error.get()?.let { throw it }
    @Suppress("UNCHECKED_CAST")
    return value.get() as T
}

/** Runs `block` on a new thread; the returned getter joins it and gives its result or exception. */
private fun <T> onThread(block: () -> T): Pair<Thread, () -> Pair<T?, Throwable?>> {
    val value = AtomicReference<T?>()
    val error = AtomicReference<Throwable?>()
    val t = Thread {
        try {
            value.set(block())
        } catch (exc: Throwable) {
            error.set(exc)
        }
    }
    t.start()
    return t to { t.join(120_000); value.get() to error.get() }
}

private fun sameAll(a: List<Embedding>, b: List<Embedding>): String? {
    if (a.size != b.size) return "${a.size} embeddings, expected ${b.size}"
    for (i in a.indices) same(a[i], b[i])?.let { return "text $i: $it" }
    return null
}

private fun kindOf(exc: Throwable?): EdgeM3ErrorKind? = (exc as? EdgeM3Failure)?.kind

internal fun apiChecks(bundle: File, work: File, lib: String, cases: Cases) {
    val truth = LocalBundle.open(bundle)
    fun real(): LoadedModel = LiteRtCRunner.open(lib, truth.modelFile, truth.model.signatures)
    val want = real().use { r -> BATCH.map { EdgeM3Core.embed(it, truth.manifest, truth.model, truth.tokenizer, r) } }
    fun gated(holdAt: Int = 0): Pair<EdgeM3Embedder, GateRunner> {
        val gate = GateRunner(real(), holdAt)
        return EdgeM3Embedder(truth.manifest, truth.model, gate, truth.tokenizer) to gate
    }
    StandInRuntime.backend = LiteRtBackend(lib, truth)

    // The options builder.
    cases.case("options-directory") {
        val o = EdgeM3Options.builder().setDirectory(bundle).setThreads(1).setChecksumMemo(null).build()
        EdgeM3Embedder.createFromOptions(o).use { e -> sameAll(e.embedBlocking(BATCH), want) }
    }
    cases.case("options-directory-weight-cache-file") {
        val o = EdgeM3Options.builder().setDirectory(bundle).setWeightCache(WeightCache.InFile(File(work, "wc"), "k"))
            .setChecksumMemo(null).build()
        EdgeM3Embedder.createFromOptions(o).use { e -> sameAll(e.embedBlocking(BATCH), want) }
    }
    val ctx = FolderContext(File(work, "app-options"), assetFolder(bundle, work))
    cases.case("options-assets") {
        val o = EdgeM3Options.builder().setAssetDir(EdgeM3Contract.ASSET_DIR).setModelCopy(ModelCopy.MEMORY).build()
        EdgeM3Embedder.createFromOptions(ctx, o).use { e -> sameAll(e.embedBlocking(BATCH), want) }
    }
    cases.case("options-assets-interpreter") {
        val o = EdgeM3Options.builder().setWeightCache(WeightCache.Off).build()
        EdgeM3Embedder.createFromOptions(ctx, o).use { e -> sameAll(e.embedBlocking(BATCH), want) }
    }
    cases.throws("options-bad-threads", "EdgeM3Exception", "threads 0", EdgeM3ErrorKind.INVALID_INPUT) {
        EdgeM3Options.builder().setThreads(0).build()
    }
    cases.throws("options-gpu-interpreter", "EdgeM3Exception", "accelerator GPU", EdgeM3ErrorKind.INVALID_INPUT) {
        EdgeM3Options.builder().setAccelerator(EdgeM3Accelerator.GPU).setWeightCache(WeightCache.Off).build()
    }
    cases.throws("options-assets-need-context", "EdgeM3Exception", "needs a Context", EdgeM3ErrorKind.INVALID_INPUT) {
        EdgeM3Embedder.createFromOptions(EdgeM3Options.builder().build())
    }

    // The batch: bit for bit the texts one by one, blocking and suspending.
    cases.case("batch-equals-one-by-one") {
        val (e, gate) = gated()
        e.use {
            val one = BATCH.map { e.embedBlocking(it) }
            sameAll(one, want) ?: sameAll(e.embedBlocking(BATCH), one)
                ?: if (gate.calls.get() != 2 * BATCH.size) "${gate.calls.get()} model calls, expected ${2 * BATCH.size}" else null
        }
    }
    cases.case("batch-suspending") {
        val (e, _) = gated()
        e.use {
            val job = Job()
            sameAll(runIn(job) { e.embed(BATCH) }, want) ?: same(runIn(job) { e.embed(BATCH[1]) }, want[1])
                ?: same(runIn(job) { e.embedIds(want[2].inputIds) }, want[2])
        }
    }
    cases.case("batch-empty") {
        val (e, gate) = gated()
        e.use { if (e.embedBlocking(listOf()).isNotEmpty() || gate.calls.get() != 0) "an empty batch ran the model" else null }
    }

    // Cancellation before each model call.
    cases.case("cancel-coroutine-mid-batch") {
        val (e, gate) = gated(holdAt = 2)
        e.use {
            val job = Job()
            val (_, result) = onThread { runIn(job) { e.embed(BATCH) } }
            if (!gate.entered.await(60, TimeUnit.SECONDS)) return@case "the second model call never started"
            job.cancel()
            gate.release.release()
            val (value, error) = result()
            when {
                value != null -> "the cancelled batch returned ${value.size} embeddings"
                error !is CancellationException -> "threw $error, expected a CancellationException"
                gate.calls.get() != 2 -> "${gate.calls.get()} model calls after cancelling during the second, expected 2"
                else -> sameAll(e.embedBlocking(BATCH.take(2)), want.take(2))  // the embedder still works
            }
        }
    }
    cases.case("cancel-thread-mid-batch") {
        val (e, gate) = gated(holdAt = 2)
        e.use {
            val interruptedAfter = AtomicReference<Boolean>()
            val (thread, result) = onThread {
                try {
                    e.embedBlocking(BATCH)
                } finally {
                    interruptedAfter.set(Thread.currentThread().isInterrupted)
                }
            }
            if (!gate.entered.await(60, TimeUnit.SECONDS)) return@case "the second model call never started"
            thread.interrupt()
            gate.release.release()
            val (value, error) = result()
            when {
                value != null -> "the interrupted batch returned ${value.size} embeddings"
                error !is EdgeM3CancelledException || kindOf(error) != EdgeM3ErrorKind.CANCELLED ->
                    "threw $error, expected EdgeM3CancelledException (kind CANCELLED)"
                gate.calls.get() != 2 -> "${gate.calls.get()} model calls, expected 2"
                interruptedAfter.get() != true -> "the thread's interrupt flag was cleared"
                else -> null
            }
        }
    }

    // close() while an embed runs: returns at once; the runner goes when the running call returns.
    cases.case("close-during-batch") {
        val (e, gate) = gated(holdAt = 1)
        val (_, result) = onThread { e.embedBlocking(BATCH) }
        if (!gate.entered.await(60, TimeUnit.SECONDS)) return@case "the model call never started"
        val t0 = System.nanoTime()
        e.close()
        val ms = (System.nanoTime() - t0) / 1e6
        val closedEarly = gate.closes.get()
        gate.release.release()
        val (value, error) = result()
        val (_, afterError) = onThread { e.embedBlocking("later") }.second()
        when {
            ms > 50 -> "close() took %.1f ms while an embed ran".format(ms)
            closedEarly != 0 -> "the runner was closed under the running call"
            value != null -> "the closed batch returned ${value.size} embeddings"
            error !is EdgeM3ClosedException || kindOf(error) != EdgeM3ErrorKind.RUNNER_CLOSED -> "threw $error, expected EdgeM3ClosedException"
            gate.calls.get() != 1 -> "${gate.calls.get()} model calls, expected 1"
            gate.closes.get() != 1 -> "the runner was closed ${gate.closes.get()} times, expected once"
            afterError !is EdgeM3ClosedException -> "a later embed threw $afterError"
            !e.isClosed -> "isClosed is false"
            else -> { println("close() during a running embed returned in %.3f ms".format(ms)); null }
        }
    }
    cases.case("close-during-single-embed") {
        val (e, gate) = gated(holdAt = 1)
        val (_, result) = onThread { runIn(Job()) { e.embed(BATCH[0]) } }
        if (!gate.entered.await(60, TimeUnit.SECONDS)) return@case "the model call never started"
        val t0 = System.nanoTime()
        e.close()
        e.close()
        val ms = (System.nanoTime() - t0) / 1e6
        gate.release.release()
        val (value, error) = result()
        when {
            ms > 50 -> "close() took %.1f ms while an embed ran".format(ms)
            error != null -> "the running call threw $error"
            value == null -> "no result"
            gate.closes.get() != 1 -> "the runner was closed ${gate.closes.get()} times, expected once"
            else -> same(value, want[0])
        }
    }
    cases.case("close-idle-releases-now") {
        val (e, gate) = gated()
        e.close()
        if (gate.closes.get() != 1) "an idle close() did not release the runner" else null
    }
    val closed = gated().first.also { it.close() }
    cases.throws("closed-batch", "EdgeM3ClosedException", "closed", EdgeM3ErrorKind.RUNNER_CLOSED) { closed.embedBlocking(BATCH) }
    cases.throws("closed-suspending", "EdgeM3ClosedException", "closed", EdgeM3ErrorKind.RUNNER_CLOSED) {
        runIn(Job()) { closed.embed(BATCH) }
    }

    // Each kind by its cause (the mismatch, missing-runtime and closed kinds: test_android_runners_*).
    cases.case("kinds-generated") {
        EdgeM3ErrorKind.values().mapNotNull { k ->
            val exc = EdgeM3Exception.of(k, "m")
            when {
                kindOf(exc) != k -> "$k: the class says ${kindOf(exc)}"
                k == EdgeM3ErrorKind.CANCELLED && exc !is CancellationException -> "cancelled is no CancellationException"
                k != EdgeM3ErrorKind.CANCELLED && exc !is EdgeM3Exception -> "$k is no EdgeM3Exception"
                else -> null
            }
        }.firstOrNull()
    }
    val model = truth.model.file
    val changed = File(work, "changed").also { d ->
        d.mkdirs()
        bundle.listFiles()!!.filter { it.isFile }.forEach { it.copyTo(File(d, it.name), overwrite = true) }
        val bytes = File(d, model).readBytes()
        bytes[bytes.size / 2] = (bytes[bytes.size / 2].toInt() xor 1).toByte()
        File(d, model).writeBytes(bytes)
    }
    cases.throws("corrupt-bundle-sha256", "EdgeM3CorruptBundleException", "sha256", EdgeM3ErrorKind.CORRUPT_BUNDLE) {
        EdgeM3Embedder.createFromOptions(EdgeM3Options.builder().setDirectory(changed).setChecksumMemo(null).build()).close()
    }
    val cut = File(work, "cut").also { d ->
        d.mkdirs()
        bundle.listFiles()!!.filter { it.isFile }.forEach { it.copyTo(File(d, it.name), overwrite = true) }
        File(d, model).let { f -> f.writeBytes(f.readBytes().copyOf(100)) }
    }
    cases.throws("corrupt-bundle-size", "EdgeM3CorruptBundleException", "manifest.json says", EdgeM3ErrorKind.CORRUPT_BUNDLE) {
        EdgeM3Embedder.fromDirectory(cut, checksumMemo = null).close()
    }
    val missing = File(work, "missing-file").also { d ->
        d.mkdirs()
        bundle.listFiles()!!.filter { it.isFile && it.name != model }.forEach { it.copyTo(File(d, it.name), overwrite = true) }
    }
    cases.throws("corrupt-bundle-missing-file", "EdgeM3CorruptBundleException", "not found", EdgeM3ErrorKind.CORRUPT_BUNDLE) {
        EdgeM3Embedder.fromDirectory(missing, checksumMemo = null).close()
    }
    cases.throws("runtime-missing-library", "EdgeM3RuntimeMissingException", "cannot load the LiteRT library",
        EdgeM3ErrorKind.RUNTIME_MISSING) {
        LiteRtCRunner.open(File(work, "nope.so").path, truth.modelFile, truth.model.signatures).close()
    }

    // The runtimes' own failures on the kit's path, raised by the stand-ins where and as LiteRT 2.2.0
    // raises them (jvm/stubs/LiteRtStubs.kt, TfliteStubs.kt): each a typed error, and the embedder
    // still embeds once the runtime recovers.
    fun <T> withFault(fault: StandInFault, block: () -> T): T {
        StandInRuntime.fault = fault
        try {
            return block()
        } finally {
            StandInRuntime.fault = null
        }
    }
    fun fromDir() = EdgeM3Options.builder().setDirectory(bundle).setThreads(1).setChecksumMemo(null)
    val runtimes = listOf("compiled" to { fromDir().build() }, "interpreter" to { fromDir().setWeightCache(WeightCache.Off).build() })
    val runFaults = mapOf(
        "compiled" to listOf(StandInFault.TENSOR_ALLOCATION to "Failed to allocate tensors", StandInFault.INVOKE to "Failed to invoke"),
        "interpreter" to listOf(StandInFault.TENSOR_ALLOCATION to "Unexpected failure when preparing tensor allocations",
            StandInFault.INVOKE to "Failed to run on the given Interpreter"))
    for ((runtime, options) in runtimes) {
        for ((fault, message) in runFaults.getValue(runtime)) {
            val name = "runtime-$runtime-${fault.name.lowercase().replace('_', '-')}"
            cases.case(name) {
                EdgeM3Embedder.createFromOptions(options()).use { e ->
                    val exc = try {
                        withFault(fault) { e.embedBlocking(BATCH[0]) }
                        null
                    } catch (thrown: Throwable) {
                        thrown
                    }
                    when {
                        exc == null -> "no exception"
                        kindOf(exc) != EdgeM3ErrorKind.RUNTIME_FAILED -> "threw ${exc.javaClass.name}: ${exc.message}"
                        message !in (exc.message ?: "") -> "message \"${exc.message}\" lacks \"$message\""
                        else -> same(e.embedBlocking(BATCH[0]), want[0])?.let { "after the failure: $it" }
                    }
                }
            }
        }
    }
    cases.throws("runtime-buffer-allocation", "EdgeM3RuntimeFailedException", "Failed to allocate aligned memory",
        EdgeM3ErrorKind.RUNTIME_FAILED) {
        withFault(StandInFault.BUFFER_ALLOCATION) { EdgeM3Embedder.createFromOptions(fromDir().build()).close() }
    }
    cases.throws("runtime-gpu-without-accelerator", "EdgeM3RuntimeFailedException", CompiledModelRunner.GPU_ARTIFACT,
        EdgeM3ErrorKind.RUNTIME_FAILED) {
        EdgeM3Embedder.createFromOptions(fromDir().setAccelerator(EdgeM3Accelerator.GPU).build()).close()
    }
    cases.case("runtime-gpu-with-accelerator") {
        StandInRuntime.gpuAccelerator = true
        try {
            EdgeM3Embedder.createFromOptions(fromDir().setAccelerator(EdgeM3Accelerator.GPU).build()).use { e ->
                sameAll(e.embedBlocking(BATCH), want)
            }
        } finally {
            StandInRuntime.gpuAccelerator = false
        }
    }
    // A model whose first output is of a type neither Kotlin API has (float16): LiteRT's
    // getOutputTensorType throws ErrorUnsupported, the Interpreter's tensor lookup IllegalArgumentException.
    val backend = StandInRuntime.backend!!
    for ((runtime, options) in runtimes) {
        val contains = if (runtime == "compiled") "cannot read" else "not recognized in Java"
        cases.throws("runtime-$runtime-unsupported-type", "EdgeM3ModelMismatchException", contains,
            EdgeM3ErrorKind.SIGNATURE_MISMATCH) {
            StandInRuntime.backend = object : StandInBackend {
                override fun open(bytes: ByteBuffer): StandInModel {
                    val m = backend.open(bytes)
                    fun first16(ts: List<StandInTensor>) = ts.mapIndexed { i, t -> if (i == 0) StandInTensor(t.name, t.shape, "float16") else t }
                    return StandInModel(m.signatures.map { StandInSignature(it.key, it.inputs, first16(it.outputs)) }, m.run, m.close)
                }
            }
            try {
                EdgeM3Embedder.createFromOptions(options()).close()
            } finally {
                StandInRuntime.backend = backend
            }
        }
    }

    // Modes as an enum: the same scores as the strings.
    cases.case("score-mode-enum") {
        val q = Retrieval.Vectors.of(want[0])
        val p = Retrieval.Vectors.of(want[1])
        val w = doubleArrayOf(0.4, 0.2, 0.4)
        ScoreMode.values().filter { m ->
            !(m.wire.contains("colbert") && want[0].colbertVecs == null) && !(m.wire.contains("sparse") && want[0].lexicalWeights == null)
        }.mapNotNull { m ->
            val a = Retrieval.score(q, p, m, w)
            val b = Retrieval.score(q, p, m.wire, w)
            if (a.toRawBits() != b.toRawBits()) "${m.wire}: $a vs $b" else null
        }.firstOrNull() ?: if (ScoreMode.values().map { it.wire } != EdgeM3Contract.SCORE_MODES) "ScoreMode is not SCORE_MODES" else null
    }

    // The other entry points, their default arguments and getters, each equal to the ways above.
    cases.case("entry-points-and-defaults") {
        val dirOptions = EdgeM3Options.builder().setSource(BundleSource.Directory(bundle)).setChecksumMemo(null).build()
        val opened = listOf(
            runIn(Job()) { EdgeM3Embedder.load(bundle, checksumMemo = null) },
            runIn(Job()) { EdgeM3Embedder.load(ctx) },
            runIn(Job()) { EdgeM3Embedder.open(ctx, dirOptions) },
            EdgeM3Embedder.createFromOptions(ctx, dirOptions))
        val problems = opened.mapIndexedNotNull { i, e ->
            e.use {
                when {
                    e.manifest.quant != truth.manifest.quant || e.model.file != truth.model.file -> "opener $i: another bundle"
                    e.model.quant != truth.model.quant || e.manifest.schemaVersion != truth.manifest.schemaVersion ||
                        e.manifest.maxLength != truth.manifest.maxLength || e.manifest.heads != truth.manifest.heads ->
                        "opener $i: another manifest"
                    !e.tokenizer.encode(BATCH[0]).contentEquals(want[0].inputIds) -> "opener $i: other ids"
                    else -> same(e.embedBlocking(BATCH[1]), want[1])?.let { "opener $i: $it" }
                }
            }
        }
        val q = Retrieval.Vectors.of(want[0])
        val p = Retrieval.Vectors.of(want[1])
        val long = "BGE-M3 on a phone. ".repeat(12)
        val chunks = gated().first.use { e -> runIn(Job()) { e.embedChunks(long) } }
        val ids = EdgeM3Core.encodeChunks(long, truth.tokenizer, truth.model.signatures)
        val longest = truth.model.signatures.map { it.seqLen }.max()
        problems.firstOrNull() ?: when {
            chunks.size < 2 || chunks.map { it.inputIds.toList() } != ids.map { it.inputIds.toList() } -> "embedChunks: ${chunks.size} chunks"
            truth.tokenizer.encodeChunks(long, longest).map { it.toList() } != truth.tokenizer.encodeChunks(long, longest, null)
                .map { it.toList() } -> "encodeChunks' default overlap"
            !Retrieval.DEFAULT_WEIGHTS.contentEquals(EdgeM3Contract.DEFAULT_MODE_WEIGHTS.toDoubleArray()) -> "DEFAULT_WEIGHTS"
            Retrieval.score(q, p, "dense") != Retrieval.score(q, p, "dense", Retrieval.DEFAULT_WEIGHTS) -> "score's default weights"
            Retrieval.hybrid("sparse+dense", 0.5, 0.25, 0.0) !=
                Retrieval.hybrid("sparse+dense", 0.5, 0.25, 0.0, Retrieval.DEFAULT_WEIGHTS) -> "hybrid's default weights"
            else -> null
        }
    }

    refusalChecks(work, truth, want, ctx, { EdgeM3Embedder(truth.manifest, truth.model, real(), truth.tokenizer) }, cases)
    jsonChecks(cases)
}

/**
 * MiniJson's refusals, each with its exact message (an EdgeM3Exception of kind INVALID_INPUT, the
 * offset where the reader stopped), what it reads (escapes, literals, numbers past Long),
 * JsonTree's typed refusals, the manifest parts' default names, and Retrieval's (Lexical's arrays and keys, an unknown mode, bad
 * weights): branches no bundle on the desktop reaches.
 */
internal fun jsonChecks(cases: Cases) {
    fun refuses(name: String, message: String, block: () -> Unit) = cases.case(name) {
        try {
            block()
            "no exception, expected \"$message\""
        } catch (exc: EdgeM3Exception) {
            when {
                exc.javaClass != EdgeM3Exception::class.java -> "threw ${exc.javaClass.name}, expected EdgeM3Exception"
                exc.kind != EdgeM3ErrorKind.INVALID_INPUT -> "kind ${exc.kind}, expected INVALID_INPUT"
                exc.message != message -> "message \"${exc.message}\", expected \"$message\""
                else -> null
            }
        }
    }
    fun json(name: String, text: String, message: String) = refuses(name, message) { MiniJson.parse(text) }
    json("json-unexpected-end", "", "JSON: unexpected end at offset 0")
    json("json-unexpected-end-in-array", "[1,", "JSON: unexpected end at offset 3")
    json("json-unexpected-character", "[x]", "JSON: unexpected \"x\" at offset 1")
    json("json-expected-key", "{1:2}", "JSON: expected a key at offset 1")
    json("json-expected-colon", "{\"a\" 1}", "JSON: expected ':' at offset 5")
    json("json-unterminated-object", "{\"a\":1", "JSON: unterminated object at offset 6")
    json("json-object-separator", "{\"a\":1 2}", "JSON: expected ',' or '}' at offset 7")
    json("json-unterminated-array", "[1", "JSON: unterminated array at offset 2")
    json("json-array-separator", "[1 2]", "JSON: expected ',' or ']' at offset 3")
    json("json-unterminated-string", "\"ab", "JSON: unterminated string at offset 3")
    json("json-control-character", "\"a\tb\"", "JSON: control character \"\\u0009\" in a string at offset 3")
    json("json-unterminated-escape", "\"a\\", "JSON: unterminated escape at offset 3")
    json("json-short-u-escape", "\"\\u12\"", "JSON: short \\u escape at offset 3")
    json("json-bad-u-escape", "\"\\u+12f\"", "JSON: bad \\u escape at offset 3")
    json("json-bad-escape", "\"\\x\"", "JSON: bad escape \"\\x\" at offset 3")
    json("json-leading-zero", "044", "JSON: bad number '044' at offset 3")
    json("json-bad-fraction", "[1.]", "JSON: bad number '1.' at offset 3")
    json("json-bad-sign", "-+1", "JSON: bad number '-+1' at offset 3")
    json("json-trailing", "1 2", "JSON: trailing characters at offset 2")
    json("json-too-deep", "[".repeat(MiniJson.MAX_DEPTH + 1), "JSON: nested deeper than ${MiniJson.MAX_DEPTH} at offset ${MiniJson.MAX_DEPTH}")
    cases.case("json-escapes") {
        val got = MiniJson.parse("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"")
        val want = "\"\\/\b\u000c\n\r\té\ud83d\ude00"
        if (got != want) "read ${quoted(got.toString())}, expected ${quoted(want)}" else null
    }
    cases.case("json-values") {
        val got = MiniJson.parse(" [true, false, null, -0.5e1, 0, -12, 12345678901234567890, {}, []]\n")
        val want = listOf(true, false, null, -5.0, 0L, -12L, 1.2345678901234567E19, mapOf<String, Any?>(), listOf<Any?>())
        if (got != want) "read $got, expected $want" else null
    }
    refuses("json-tree-object", "w: expected a JSON object") { JsonTree.obj(listOf<Any?>(), "w") }
    refuses("json-tree-array", "w: expected a JSON array") { JsonTree.list("x", "w") }
    refuses("json-tree-field", "w: missing \"k\"") { JsonTree.field(mapOf("j" to 1L), "k", "w") }
    refuses("json-tree-string", "w: expected a string") { JsonTree.str(1L, "w") }
    refuses("json-tree-bool", "w: expected true or false") { JsonTree.bool("true", "w") }
    refuses("json-tree-int-type", "w: expected an integer") { JsonTree.int("1", "w") }
    refuses("json-tree-int-fraction", "w: expected an integer, got 1.5") { JsonTree.int(1.5, "w") }
    refuses("json-tree-int-range", "w: expected an integer, got 2147483648") { JsonTree.int(2147483648L, "w") }
    refuses("json-tree-long-type", "w: expected an integer") { JsonTree.long(null, "w") }
    refuses("json-tree-long-double", "w: expected an integer, got 2.0") { JsonTree.long(2.0, "w") }
    refuses("json-tree-float", "w: expected a number") { JsonTree.float(true, "w") }
    refuses("json-tree-ints-element", "w[1]: expected an integer, got 0.5") { JsonTree.ints(listOf(1L, 0.5), "w") }
    // Manifest's parts read alone, their `where` left to the default: a non-object named by its part.
    val parts = listOf<Pair<String, (Any?) -> Any>>("SpecialIds" to { t -> SpecialIds.fromJson(t) },
        "WordPieceOptions" to { t -> WordPieceOptions.fromJson(t) }, "BpeOptions" to { t -> BpeOptions.fromJson(t) },
        "TensorSpec" to { t -> TensorSpec.fromJson(t) }, "Signature" to { t -> Signature.fromJson(t) },
        "ModelEntry" to { t -> ModelEntry.fromJson(t) }, "FileEntry" to { t -> FileEntry.fromJson(t) })
    for ((part, read) in parts) {
        refuses("manifest-part-$part", "${EdgeM3Contract.MANIFEST}: $part: expected a JSON object") { read(listOf<Any?>()) }
    }
    // Retrieval's refusals (Lexical's arrays, an unknown mode, bad weights) and the dictionary sparse.
    refuses("lexical-lengths", "lexical ids and weights differ in length") { Retrieval.Lexical(intArrayOf(1, 2), floatArrayOf(0.5f)) }
    refuses("lexical-descending", "lexical ids must be strictly ascending") {
        Retrieval.Lexical(intArrayOf(2, 1), floatArrayOf(0.5f, 0.5f))
    }
    refuses("lexical-repeated", "lexical ids must be strictly ascending") {
        Retrieval.Lexical(intArrayOf(1, 1), floatArrayOf(0.5f, 0.5f))
    }
    refuses("lexical-key", "lexical weight key \"x\" is not a token id") { Retrieval.Lexical.of(mapOf("x" to 1f)) }
    refuses("mode-unknown", "mode \"bm25\": choose from ${Retrieval.MODES.joinToString(", ")}") { Retrieval.signals("bm25") }
    for ((name, w) in listOf("two" to doubleArrayOf(1.0, 1.0), "negative" to doubleArrayOf(1.0, -1.0, 1.0),
                             "infinite" to doubleArrayOf(1.0, Double.POSITIVE_INFINITY, 1.0),
                             "nan" to doubleArrayOf(Double.NaN, 1.0, 1.0), "four" to doubleArrayOf(1.0, 1.0, 1.0, 1.0))) {
        refuses("weights-$name", "weights: must be three finite numbers >= 0 (dense, sparse, colbert), " +
            "got ${w.joinToString(", ", "[", "]")}") { Retrieval.checkWeights(w) }
    }
    cases.case("sparse-dictionaries") {
        val got = listOf(Retrieval.sparse(mapOf("3" to 2f, "1" to 0.5f), mapOf("7" to 1f, "3" to 0.25f)),
            Retrieval.sparse(mapOf("1" to 0.5f), mapOf("7" to 1f)), Retrieval.signals("colbert+sparse+dense"),
            Retrieval.checkWeights(doubleArrayOf(0.0, 0.5, 2.0)).toList())
        val want = listOf(0.5, 0.0, listOf("colbert", "sparse", "dense"), listOf(0.0, 0.5, 2.0))
        if (got != want) "got $got, expected $want" else null
    }
    cases.case("json-tree-reads") {
        val got = listOf(JsonTree.int(-3L, "w"), JsonTree.int(4.0, "w"), JsonTree.long(5L, "w"),
            JsonTree.float(0.1, "w").toRawBits(), JsonTree.ints(listOf(1L, 2L), "w").toList())
        val want = listOf(-3, 4, 5L, 0.1f.toRawBits(), listOf(1, 2))
        if (got != want) "read $got, expected $want" else null
    }
}
