// JVM check of EdgeM3Core against a bundle's golden.json (run by tests/test_kits.py in CI).
// args: manifest.json golden.json pieces.json [vocab_map.json]
// pieces.json: the SentencePiece-level piece ids of every golden text, from the Python
// tokenizer, since no SentencePiece binding runs in this JVM test.
import edge_m3.EdgeM3Core
import edge_m3.Manifest
import edge_m3.MiniJson
import java.io.File
import kotlin.system.exitProcess

@Suppress("UNCHECKED_CAST")
fun main(args: Array<String>) {
    fun load(p: String) = MiniJson.parse(File(p).readText(Charsets.UTF_8))
    val kept = if (args.size > 3) ((load(args[3]) as Map<String, Any?>)["kept_ids"] as List<Number>).map { it.toInt() }.toIntArray() else null
    val manifest = Manifest.fromJson(load(args[0]) as Map<String, Any?>, "tflite", kept)
    val golden = load(args[1]) as Map<String, Any?>
    val pieces = load(args[2]) as List<List<Number>>
    val spec = manifest.tokenizer
    val maxLen = manifest.signatures.last().seqLen
    var passed = 0
    var failed = 0
    for ((n, case) in (golden["cases"] as List<Map<String, Any?>>).withIndex()) {
        val problems = ArrayList<String>()
        val want = (case["input_ids"] as List<Number>).map { it.toInt() }.toIntArray()
        val ids = EdgeM3Core.truncate(spec, EdgeM3Core.mapPieces(spec, pieces[n].map { it.toInt() }.toIntArray()), maxLen)
        if (!ids.contentEquals(want)) problems.add("input_ids")
        val sig = EdgeM3Core.chooseSignature(manifest, ids.size)
        if (sig.name != case["signature"] || sig.seqLen != (case["seq_len"] as Number).toInt()) problems.add("signature")
        val (padded, mask) = EdgeM3Core.pad(spec, EdgeM3Core.toModelIds(spec, ids), sig.seqLen)
        if (padded.size != sig.seqLen || mask.sum() != ids.size) problems.add("padding")
        val raw = case["raw"] as Map<String, Any?>
        val dense = ((raw["dense_vecs"] as List<List<Number>>)[0]).map { it.toFloat() }
        if (dense != (case["dense_vecs"] as List<Number>).map { it.toFloat() }) problems.add("dense_vecs")
        val sparse = ((raw["sparse_weights"] as List<List<Number>>)[0]).map { it.toFloat() }.toFloatArray()
        val lex = EdgeM3Core.lexicalWeights(spec, ids, sparse)
        val wantLex = (case["lexical_weights"] as Map<String, Number>).mapValues { it.value.toFloat() }
        if (lex != wantLex) problems.add("lexical_weights")
        val col = ((raw["colbert_vecs"] as List<List<List<Number>>>)[0]).map { r -> r.map { it.toFloat() }.toFloatArray() }.toTypedArray()
        val gotCol = EdgeM3Core.colbertVectors(col, ids.size).map { it.toList() }
        val wantCol = (case["colbert_vecs"] as List<List<Number>>).map { r -> r.map { it.toFloat() } }
        if (gotCol != wantCol) problems.add("colbert_vecs")
        if (problems.isEmpty()) passed++ else { failed++; println("case $n: ${problems.joinToString()}") }
    }
    println("golden: $passed passed, $failed failed")
    exitProcess(if (failed == 0 && passed > 0) 0 else 1)
}
