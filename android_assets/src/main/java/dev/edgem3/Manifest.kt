package dev.edgem3

class SpecialIds(val bos: Int, val pad: Int, val eos: Int, val unk: Int, val mask: Int) {
    /** The id of a special token by its manifest key (EdgeM3Contract.SPECIAL_KEYS). */
    operator fun get(key: String): Int = when (key) {
        "bos" -> bos
        "pad" -> pad
        "eos" -> eos
        "unk" -> unk
        "mask" -> mask
        else -> throw EdgeM3Exception("manifest.json: unknown special token key $key")
    }

    /** Every special id: what a trimmed vocabulary must keep. */
    fun all(): List<Int> = EdgeM3Contract.SPECIAL_KEYS.map { get(it) }

    /** What lexical weights leave out: FlagEmbedding drops <s>, </s>, <pad>, <unk>, keeps <mask>. */
    fun skip(): Set<Int> = EdgeM3Contract.LEXICAL_SKIP_KEYS.map { get(it) }.toSet()
}

/** The manifest's `tokenizer` entry (edge_m3.tokenizer.TokenizerSpec). */
class TokenizerSpec(
    val file: String,
    val special: SpecialIds,
    val spUnkId: Int,
    val idOffset: Int,
    val vocabSize: Int,
    val vocabMapFile: String?,
    val specialTokens: SpecialTokens = SpecialTokens.XLMR
) {
    companion object {
        /** The `tokenizer` object of manifest.json; `special_tokens` absent or null: XLM-R's strings. */
        fun fromJson(tree: Any?): TokenizerSpec {
            val w = "manifest.json: tokenizer"
            val tok = JsonTree.obj(tree, w)
            val sp = JsonTree.obj(JsonTree.field(tok, "special_ids", w), "$w.special_ids")
            fun special(k: String): Int = JsonTree.int(JsonTree.field(sp, k, "$w.special_ids"), "$w.special_ids.$k")
            var vocabMapFile: String? = null
            val vocabMap = tok["vocab_map"]
            if (vocabMap != null) {
                vocabMapFile = JsonTree.str(
                    JsonTree.field(JsonTree.obj(vocabMap, "$w.vocab_map"), "file", "$w.vocab_map"),
                    "$w.vocab_map.file")
            }
            val tokens = tok["special_tokens"]
            return TokenizerSpec(
                JsonTree.str(JsonTree.field(tok, "file", w), "$w.file"),
                SpecialIds(special("bos"), special("pad"), special("eos"), special("unk"), special("mask")),
                JsonTree.int(JsonTree.field(tok, "sp_unk_id", w), "$w.sp_unk_id"),
                JsonTree.int(JsonTree.field(tok, "id_offset", w), "$w.id_offset"),
                JsonTree.int(JsonTree.field(tok, "vocab_size", w), "$w.vocab_size"),
                vocabMapFile,
                if (tokens == null) SpecialTokens.XLMR else
                    SpecialTokens.fromMap(JsonTree.obj(tokens, "$w.special_tokens"), "$w.special_tokens")
            )
        }
    }
}

class TensorSpec(val name: String, val shape: IntArray, val dtype: String)

class Signature(val name: String, val seqLen: Int, val inputs: List<TensorSpec>, val outputs: List<TensorSpec>) {
    fun output(name: String): TensorSpec? = outputs.firstOrNull { it.name == name }
}

class ModelEntry(val format: String, val file: String, val quant: String, val signatures: List<Signature>) {
    fun signature(name: String): Signature {
        for (s in signatures) if (s.name == name) return s
        throw EdgeM3Exception("manifest.json: $file has no signature $name")
    }
}

class FileEntry(val sha256: String, val size: Long)

class Manifest(
    val schemaVersion: Int,
    val quant: String,
    val hiddenSize: Int,
    val maxLength: Int,
    val heads: List<String>,
    val tokenizer: TokenizerSpec,
    val models: List<ModelEntry>,
    val files: Map<String, FileEntry>
) {
    /** The model entry of `format` ("tflite" for the Android and iOS kits). */
    fun model(format: String): ModelEntry {
        for (m in models) if (m.format == format) return m
        throw EdgeM3Exception("manifest.json: no $format model (has ${models.map { it.format }})")
    }

    companion object {
        fun fromJson(tree: Any?): Manifest {
            val w = EdgeM3Contract.MANIFEST
            val t = JsonTree.obj(tree, w)
            val version = JsonTree.int(JsonTree.field(t, "schema_version", w), "$w: schema_version")
            if (version != EdgeM3Contract.SCHEMA_VERSION) {
                throw EdgeM3Exception("$w: schema_version $version, this kit reads ${EdgeM3Contract.SCHEMA_VERSION}")
            }
            val tokenizer = TokenizerSpec.fromJson(JsonTree.field(t, "tokenizer", w))
            val models = JsonTree.list(JsonTree.field(t, "models", w), "$w: models").mapIndexed { i, m ->
                parseModel(JsonTree.obj(m, "$w: models[$i]"), "$w: models[$i]")
            }
            val files = LinkedHashMap<String, FileEntry>()
            val fileTree = t["files"]
            if (fileTree != null) {
                for ((name, e) in JsonTree.obj(fileTree, "$w: files")) {
                    val f = JsonTree.obj(e, "$w: files.$name")
                    files[name] = FileEntry(JsonTree.str(f["sha256"], "$w: files.$name.sha256"),
                        JsonTree.int(f["size"], "$w: files.$name.size").toLong())
                }
            }
            return Manifest(
                version,
                JsonTree.str(JsonTree.field(t, "quant", w), "$w: quant"),
                JsonTree.int(JsonTree.field(t, "hidden_size", w), "$w: hidden_size"),
                JsonTree.int(JsonTree.field(t, "max_length", w), "$w: max_length"),
                JsonTree.list(JsonTree.field(t, "heads", w), "$w: heads").map { JsonTree.str(it, "$w: heads") },
                tokenizer, models, files
            )
        }

        private fun parseModel(m: Map<String, Any?>, w: String): ModelEntry {
            val sigs = JsonTree.list(JsonTree.field(m, "signatures", w), "$w: signatures").mapIndexed { i, s ->
                val st = JsonTree.obj(s, "$w: signatures[$i]")
                val sw = "$w: signatures[$i]"
                Signature(
                    JsonTree.str(JsonTree.field(st, "name", sw), "$sw.name"),
                    JsonTree.int(JsonTree.field(st, "seq_len", sw), "$sw.seq_len"),
                    parseTensors(st["inputs"], "$sw.inputs"),
                    parseTensors(st["outputs"], "$sw.outputs")
                )
            }
            if (sigs.isEmpty()) throw EdgeM3Exception("$w: no signatures")
            return ModelEntry(
                JsonTree.str(JsonTree.field(m, "format", w), "$w.format"),
                JsonTree.str(JsonTree.field(m, "file", w), "$w.file"),
                JsonTree.str(m["quant"] ?: "", "$w.quant"),
                sigs.sortedBy { it.seqLen }
            )
        }

        private fun parseTensors(x: Any?, w: String): List<TensorSpec> {
            if (x == null) return emptyList()
            return JsonTree.list(x, w).mapIndexed { i, e ->
                val t = JsonTree.obj(e, "$w[$i]")
                TensorSpec(JsonTree.str(t["name"], "$w[$i].name"), JsonTree.ints(t["shape"], "$w[$i].shape"),
                    JsonTree.str(t["dtype"], "$w[$i].dtype"))
            }
        }
    }
}

/** Original id -> row of a trimmed embedding table (vocab_map.json); ids not kept -> the <unk> row. */
class VocabMap(val keptIds: IntArray, special: SpecialIds) {
    val unkRow: Int = row(special.unk)

    /** Binary search in the sorted kept ids; the <unk> row when absent (edge_m3.vocab.row_map). */
    fun row(id: Int): Int {
        var lo = 0
        var hi = keptIds.size - 1
        while (lo <= hi) {
            val mid = (lo + hi) ushr 1
            val v = keptIds[mid]
            if (v < id) lo = mid + 1 else if (v > id) hi = mid - 1 else return mid
        }
        return unkRow
    }

    fun rows(ids: IntArray): IntArray = IntArray(ids.size) { row(ids[it]) }

    companion object {
        fun fromJson(tree: Any?, tokenizer: TokenizerSpec): VocabMap {
            val w = tokenizer.vocabMapFile ?: EdgeM3Contract.VOCAB_MAP
            val kept = JsonTree.ints(JsonTree.field(JsonTree.obj(tree, w), "kept_ids", w), "$w: kept_ids")
            for (i in kept.indices) {
                if (kept[i] < 0 || kept[i] >= tokenizer.vocabSize || (i > 0 && kept[i] <= kept[i - 1])) {
                    throw EdgeM3Exception("$w: kept ids must be sorted, unique and < ${tokenizer.vocabSize}")
                }
            }
            // Every special token, as edge_m3/vocab.py's REQUIRED_SPECIALS.
            val missing = tokenizer.special.all().filter { kept.indexOf(it) < 0 }
            if (missing.isNotEmpty()) throw EdgeM3Exception("$w: kept ids lack the special ids $missing")
            return VocabMap(kept, tokenizer.special)
        }
    }
}
