package dev.edgem3

// What the manifest types do beyond holding fields: the generated Manifest.kt (from
// edge_m3/spec/ by tools/codegen/gen_kit_contract.py) calls the checks below by name.
// ios_assets/Sources/EdgeM3/ManifestRules.swift is the same for the Swift kit.

/** The id of a special token by its manifest key (EdgeM3Contract.SPECIAL_KEYS). */
operator fun SpecialIds.get(key: String): Int = when (key) {
    "bos" -> bos
    "pad" -> pad
    "eos" -> eos
    "unk" -> unk
    "mask" -> mask
    else -> throw EdgeM3Exception("manifest.json: unknown special token key $key")
}

/** Every special id: what a trimmed vocabulary must keep. */
fun SpecialIds.all(): List<Int> = EdgeM3Contract.SPECIAL_KEYS.map { get(it) }

/** What lexical weights leave out: FlagEmbedding drops <s>, </s>, <pad>, <unk>, keeps <mask>. */
fun SpecialIds.skip(): Set<Int> = EdgeM3Contract.LEXICAL_SKIP_KEYS.map { get(it) }.toSet()

/** The output called `name`, null when the signature does not export it. */
fun Signature.output(name: String): TensorSpec? = outputs.firstOrNull { it.name == name }

/** The signature called `name`; a missing one names the model file. */
fun ModelEntry.signature(name: String): Signature =
    signatures.firstOrNull { it.name == name } ?: throw EdgeM3Exception("manifest.json: $file has no signature $name")

/** The model entry of `format` ("tflite" for the Android and iOS kits). */
fun Manifest.model(format: String): ModelEntry = models.firstOrNull { it.format == format }
    ?: throw EdgeM3Exception("manifest.json: no $format model (has ${models.map { it.format }})")

/** `schema_version` must be the one this kit was generated for (`where`: "manifest.json: schema_version"). */
internal fun checkedSchemaVersion(version: Int, where: String): Int {
    if (version != EdgeM3Contract.SCHEMA_VERSION) {
        throw EdgeM3Exception("$where $version, this kit reads ${EdgeM3Contract.SCHEMA_VERSION}")
    }
    return version
}

/** A file name from manifest.json (tokenizer.file, tokenizer.vocab_map.file, models[].file): a
 *  name in the bundle's folder, never a path, no line break (edge_m3/spec/manifest.py is_file_name:
 *  "../x" or "/x" opened a file outside the bundle). */
internal fun checkedFileName(name: String, where: String): String {
    if (name in EdgeM3Contract.NOT_FILE_NAMES || EdgeM3Contract.FILE_NAME_SEPARATORS.any { name.contains(it) } ||
        name.any { it in EdgeM3Contract.LINE_BREAK_ESCAPES }) {
        throw EdgeM3Exception("$where: ${quoted(name)} is not a file name in the bundle (a name, not a path)")
    }
    return name
}

/** `files`: every key a file name (checkedFileName). */
internal fun checkedFileNames(files: Map<String, FileEntry>, where: String): Map<String, FileEntry> {
    for (name in files.keys) checkedFileName(name, where)  // the name is shown once, quoted
    return files
}

@JvmName("checkedFileNameOrNull")
internal fun checkedFileName(name: String?, where: String): String? = name?.let { checkedFileName(it, where) }

/** A model's signatures: at least one, each with room for <s> and </s>, sorted by length. */
internal fun checkedSignatures(signatures: List<Signature>, file: String): List<Signature> {
    if (signatures.isEmpty()) throw EdgeM3Exception("manifest.json: $file has no signatures")
    for (s in signatures) {
        if (s.seqLen < 2) {
            throw EdgeM3Exception("manifest.json: $file signature ${s.name}: seq_len ${s.seqLen} < 2 (no room for <s> and </s>)")
        }
    }
    return signatures.sortedBy { it.seqLen }
}

/** `special_tokens`: absent or null gives XLM-R's strings; present, every key is required. */
internal fun checkedSpecialTokens(tree: Any?, where: String): SpecialTokens =
    if (tree == null) SpecialTokens.XLMR else SpecialTokens.fromMap(JsonTree.obj(tree, where), where)

/** `tokenizer.kind`: one of EdgeM3Contract.TOKENIZER_KINDS (`where`: "manifest.json: tokenizer.kind"). */
internal fun checkedTokenizerKind(kind: String, where: String): String {
    if (kind !in EdgeM3Contract.TOKENIZER_KINDS) throw unknownTokenizerKind(kind, where)
    return kind
}

/** A kind this kit has no tokenizer for (a newer bundle, or a typo), named with the ones it has. */
internal fun unknownTokenizerKind(kind: String, where: String): EdgeM3Exception =
    EdgeM3Exception("$where '${quoted(kind).removeSurrounding("\"")}' unknown (known: ${EdgeM3Contract.TOKENIZER_KINDS.joinToString(", ")})")
