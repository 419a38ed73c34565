// JVM-only CI check (not part of the app): runs the Kotlin core against a bundle's golden.json.
//
//   java -cp edge_m3_kit.jar[:jna.jar] dev.edgem3.GoldenCheckKt <bundle_dir> [input_cases.json] [--live LIBLITERT]
//
// Per case it checks, all bit for bit:
//   (a) the kit's tokenizer (of the manifest's kind) on the text (truncated to the largest signature) == input_ids,
//   (b) signature choice == signature / seq_len,
//   (c) post-processing of `raw` == dense_vecs, lexical_weights, colbert_vecs,
//   (d) the whole embed() path with a runner that replays `raw` (and checks the padded
//       ids and mask it is given) gives the same result;
// and, first, every file of manifest.json's `files` passes ModelCheck (size, SHA-256).
// Prints "golden: N passed, M failed". With input_cases.json (tests/conftest.py: texts as UTF-16
// code units, lone surrogates included, and the Python pipeline's answer to each), the whole
// embed() path must give the same error text, or the same truncated ids and signature; prints
// "inputs: N passed, M failed". With --live LIBLITERT (the wheel's libLiteRt.so; JNA on the class
// path), every case also runs live: the model through LiteRtCRunner on this CPU, the outputs within
// the variant's device tolerance (EdgeM3Contract.TOLERANCES); a signature no case reaches runs ids
// of its length, checked for shape (as the Swift kit's live test);
// prints "live: N passed, M failed". Exit 0 all passed, 1 some failed, 2 bad input.
package dev.edgem3

import java.io.File
import kotlin.system.exitProcess

private fun readJson(f: File): Any? {
    if (!f.isFile) throw EdgeM3Exception("$f: not found")
    return MiniJson.parse(f.readText(Charsets.UTF_8))
}

/** A runtime key with every kind of character weightCacheName must treat as Python does. */
const val WEIGHT_CACHE_KEY_PROBE = "apk-1700000000000 v2.3.0/é_x"

/** Replays one case's recorded outputs, after checking what the pipeline feeds the model. */
private class ReplayRunner(
    val raw: RawOutputs,
    val expectedRows: IntArray,
    val pad: Int,
    val problems: MutableList<String>
) : ModelRunner {
    override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
        val l = signature.seqLen
        if (inputIds.size != l || attentionMask.size != l) {
            problems.add("runner got ${inputIds.size} ids / ${attentionMask.size} mask for length $l")
        }
        for (i in 0 until l) {
            val real = i < expectedRows.size
            val id = if (real) expectedRows[i] else pad
            if (inputIds.getOrNull(i) != id || attentionMask.getOrNull(i) != (if (real) 1 else 0)) {
                problems.add("padded input differs at position $i")
                break
            }
        }
        // As LiteRT's CompiledModel hands them over: flat float32 per output, shaped by the kit.
        return ModelIo.outputs(signature) { name -> flatten(name) }
    }

    private fun flatten(name: String): FloatArray = when (name) {
        EdgeM3Contract.DENSE_VECS -> raw.denseVecs?.flatMap { it.asList() }
        EdgeM3Contract.SPARSE_WEIGHTS -> raw.sparseWeights?.flatMap { it.asList() }
        EdgeM3Contract.COLBERT_VECS -> raw.colbertVecs?.flatMap { m -> m.flatMap { it.asList() } }
        else -> null
    }?.toFloatArray() ?: throw EdgeM3Exception("no recorded $name")
}

/** Zeros of the signature's output shapes: for checks of the steps around the model. */
private object ZeroRunner : ModelRunner {
    override fun run(signature: Signature, inputIds: IntArray, attentionMask: IntArray): RawOutputs {
        fun shape(name: String): IntArray? = signature.output(name)?.shape
        return RawOutputs(
            shape(EdgeM3Contract.DENSE_VECS)?.let { s -> Array(s[0]) { FloatArray(s[1]) } },
            shape(EdgeM3Contract.SPARSE_WEIGHTS)?.let { s -> Array(s[0]) { FloatArray(s[1]) } },
            shape(EdgeM3Contract.COLBERT_VECS)?.let { s -> Array(s[0]) { Array(s[1]) { FloatArray(s[2]) } } })
    }
}

/** Each input case through EdgeM3Core.embed against the Python pipeline's answer; the failure count. */
private fun checkInputs(file: File, manifest: Manifest, model: ModelEntry, tokenizer: EdgeM3Tokenizer): Int {
    val w = file.name
    val cases = JsonTree.list(readJson(file), w)
    var failed = 0
    for ((i, c) in cases.withIndex()) {
        val cw = "$w[$i]"
        val ct = JsonTree.obj(c, cw)
        val units = JsonTree.ints(JsonTree.field(ct, "utf16", cw), "$cw.utf16")
        val text = String(CharArray(units.size) { units[it].toChar() })  // lone surrogates kept
        val want = if (ct["error"] != null) "error: " + JsonTree.str(ct["error"], "$cw.error") else
            "${JsonTree.ints(JsonTree.field(ct, EdgeM3Contract.INPUT_IDS, cw), "$cw.${EdgeM3Contract.INPUT_IDS}").toList()} " +
                JsonTree.str(JsonTree.field(ct, "signature", cw), "$cw.signature")
        val got = try {
            val e = EdgeM3Core.embed(text, manifest, model, tokenizer, ZeroRunner)
            "${e.inputIds.toList()} ${e.signature}"
        } catch (exc: EdgeM3Exception) {
            "error: ${exc.message}"
        }
        if (got != want) {
            failed++
            println("FAIL input $i: $got != $want")
        }
    }
    println("inputs: ${cases.size - failed} passed, $failed failed")
    return failed
}

private fun checkShapes(sig: Signature, raw: RawOutputs, problems: MutableList<String>) {
    fun shapeOf(x: Any?): List<Int> = when (x) {
        is FloatArray -> listOf(x.size)
        is Array<*> -> listOf(x.size) + (if (x.isEmpty()) emptyList() else shapeOf(x[0]))
        else -> emptyList()
    }
    val got = mapOf(EdgeM3Contract.DENSE_VECS to raw.denseVecs, EdgeM3Contract.SPARSE_WEIGHTS to raw.sparseWeights,
        EdgeM3Contract.COLBERT_VECS to raw.colbertVecs)
    for ((name, value) in got) {
        val spec = sig.output(name)
        if (spec == null && value == null) continue
        val want = spec?.shape?.toList()
        if (want == null || value == null || shapeOf(value) != want) {
            problems.add("raw $name shape ${value?.let { shapeOf(it) }} != manifest $want")
        }
    }
}

fun main(args: Array<String>) {
    val rest = args.toMutableList()
    val at = rest.indexOf("--live")
    val lib = if (at < 0) null else rest.getOrNull(at + 1)
    if (at >= 0) {
        if (lib == null) rest.clear() else rest.subList(at, at + 2).clear()
    }
    if (rest.size !in 1..2) {
        System.err.println("usage: GoldenCheck <bundle_dir> [input_cases.json] [--live LIBLITERT]")
        exitProcess(2)
    }
    try {
        var failed = check(File(rest[0]), rest.getOrNull(1)?.let { File(it) })
        if (lib != null) failed += checkLive(File(rest[0]), lib)
        exitProcess(if (failed == 0) 0 else 1)
    } catch (exc: EdgeM3Exception) {
        System.err.println("golden: error: ${exc.message}")
        exitProcess(2)
    } catch (exc: NoClassDefFoundError) {
        System.err.println("golden: error: JNA is not on the class path (${exc.message}): apt-get install -y libjna-java")
        exitProcess(2)
    }
}

private fun check(bundle: File, inputs: File?): Int {
    val t0 = System.nanoTime()
    val manifest = Manifest.fromJson(readJson(File(bundle, EdgeM3Contract.MANIFEST)))
    val model = manifest.model("tflite")
    val golden = Golden.parse(readJson(File(bundle, EdgeM3Contract.GOLDEN)))
    val t1 = System.nanoTime()
    val tokenizer = LocalBundle.tokenizer(bundle, manifest.tokenizer)
    val vocab = tokenizer.vocab
    val tokMs = (System.nanoTime() - t1) / 1000000
    println("golden: ${golden.cases.size} cases, quant ${golden.quant}, signatures " +
        "${model.signatures.map { it.name }}, tokenizer ${manifest.tokenizer.kind}, vocab ${if (vocab == null) "full" else "trimmed ${vocab.keptIds.size}"}, " +
        "parsed in ${(System.nanoTime() - t0) / 1000000} ms (tokenizer $tokMs ms)")
    if (golden.modelFile != model.file) throw EdgeM3Exception("golden.json: model_file ${golden.modelFile} != ${model.file}")
    // The app's load-time check (ModelCheck) on every file the manifest lists: size and SHA-256.
    for ((name, entry) in manifest.files) {
        val f = File(bundle, name)
        ModelCheck.verify(f.path, entry, f.length(), f.lastModified(), null) { f.inputStream() }
    }
    println("golden: ${manifest.files.size} files match manifest.json (size, sha256)")
    val sha = manifest.files[model.file]?.sha256 ?: throw EdgeM3Exception("manifest.json: no files entry for ${model.file}")
    println("golden: weight cache file ${EdgeM3Contract.weightCacheName(sha, WEIGHT_CACHE_KEY_PROBE)}")
    val special = manifest.tokenizer.special
    var passed = 0
    var failed = 0
    for ((i, case) in golden.cases.withIndex()) {
        val problems = ArrayList<String>()
        // (a) + (b)
        val enc = EdgeM3Core.encode(case.text, tokenizer, model.signatures)
        if (!enc.inputIds.contentEquals(case.expected.inputIds)) {
            problems.add("input_ids ${enc.inputIds.toList()} != golden ${case.expected.inputIds.toList()}")
        }
        if (enc.signature.name != case.expected.signature || enc.signature.seqLen != case.expected.seqLen) {
            problems.add("signature ${enc.signature.name}/${enc.signature.seqLen} != golden " +
                "${case.expected.signature}/${case.expected.seqLen}")
        }
        // (c) post-processing of the recorded outputs, on the golden ids
        val sig = model.signature(case.expected.signature)
        checkShapes(sig, case.raw, problems)
        val post = EdgeM3Core.postprocess(case.raw, Encoded(case.expected.inputIds, sig), special, vocab)
        problems.addAll(Golden.compareExact(post, case.expected).map { "postprocess: $it" })
        // (d) the app's embed() path end to end, the model replaced by the recording
        val rows = if (vocab == null) case.expected.inputIds else vocab.rows(case.expected.inputIds)
        val pad = if (vocab == null) special.pad else vocab.row(special.pad)
        val runner = ReplayRunner(case.raw, rows, pad, problems)
        val live = EdgeM3Core.embed(case.text, manifest, model, tokenizer, runner)
        problems.addAll(Golden.compareExact(live, case.expected).map { "embed: $it" })
        problems.addAll(Golden.compareWithin(live, case.expected, Golden.toleranceFor(manifest.quant))
            .map { "within tolerance: $it" })
        if (problems.isEmpty()) {
            passed++
        } else {
            failed++
            val shown = if (case.text.length > 40) case.text.substring(0, 40) + "..." else case.text
            println("FAIL case $i ($shown):")
            for (p in problems.take(5)) println("  $p")
        }
    }
    println("golden: $passed passed, $failed failed")
    if (inputs != null) failed += checkInputs(inputs, manifest, model, tokenizer)
    return failed
}

/** Every golden case live through LiteRtCRunner, within the variant's device tolerance; the failure count. */
private fun checkLive(bundle: File, lib: String): Int {
    val b = LocalBundle.open(bundle)
    val manifest = b.manifest
    val model = b.model
    val golden = Golden.parse(readJson(File(bundle, EdgeM3Contract.GOLDEN)))
    val tol = Golden.toleranceFor(manifest.quant)
    var failed = 0
    val seen = HashMap<String, Int>()
    var worstCos = 1.0
    LiteRtCRunner.open(lib, b.modelFile, model.signatures).use { runner ->
        for ((i, case) in golden.cases.withIndex()) {
            val got = EdgeM3Core.embed(case.text, manifest, model, b.tokenizer, runner)
            seen[got.signature] = (seen[got.signature] ?: 0) + 1
            val a = got.denseVecs
            val e = case.expected.denseVecs
            if (a != null && e != null && a.size == e.size) worstCos = minOf(worstCos, Golden.cosine(a, e))
            val problems = Golden.compareWithin(got, case.expected, tol)
            if (problems.isNotEmpty()) {
                failed++
                println("FAIL live case $i (${got.signature}):")
                for (p in problems.take(5)) println("  $p")
            }
        }
        // Lengths golden.json's texts do not reach (a default bundle's longest): ids of that length,
        // [bos] [mask]... [eos], checked for shape and finite values (as the Swift kit's live test).
        val unreached = model.signatures.filter { seen[it.name] == null }
        for (s in unreached) {
            val sp = manifest.tokenizer.special
            val ids = IntArray(s.seqLen) { if (it == 0) sp.bos else if (it == s.seqLen - 1) sp.eos else sp.mask }
            val got = EdgeM3Core.run(Encoded(ids, s), manifest, runner, b.tokenizer.vocab)
            seen[s.name] = 1
            val values = (got.denseVecs?.toList() ?: emptyList()) + (got.lexicalWeights?.values ?: emptyList()) +
                (got.colbertVecs?.flatMap { it.toList() } ?: emptyList())
            if (got.signature != s.name || (got.denseVecs?.size ?: manifest.hiddenSize) != manifest.hiddenSize ||
                (got.colbertVecs?.size ?: s.seqLen - 1) != s.seqLen - 1 || values.isEmpty() || values.any { !it.isFinite() }) {
                failed++
                println("FAIL live: ${s.name} on ids of its length: wrong shape or values")
            }
        }
        if (unreached.isNotEmpty()) {
            println("live: ${unreached.map { it.name }} not reached by golden.json: ran ids of that length, shapes checked")
        }
    }
    println("live: ${golden.cases.size - minOf(failed, golden.cases.size)} passed, $failed failed (quant ${manifest.quant}, " +
        "signatures ${model.signatures.map { "${it.name}:${seen[it.name] ?: 0}" }}, dense cosine min $worstCos, " +
        "tolerance ${tol.denseCosineMin}/${tol.maxAbs})")
    return failed
}
