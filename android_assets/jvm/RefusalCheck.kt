// JVM-only CI check (not part of the app): the refusals and overloads no bundle on the desktop
// reached before (issue 34, item 5: the lines that had never run), each refusal by its exact typed
// kind (EdgeM3ErrorKind, generated from spec.KIT_ERROR_KINDS): EdgeM3WritableIndex's (bad ids,
// refused vectors, a closed index, another bundle; foreign and spoiled databases and index folders are
// the conformance suite's, tests/conformance/index/ run by jvm/conformance/IndexConformanceTest.kt), the
// text API through a live embedder (embedChunks), the ScoreMode overloads of both indexes' search,
// extractAsset's size and hash checks, and the tokenizers' corrupt files (SentencePiece, WordPiece,
// byte-level BPE). Run inside `AndroidCheck api` (jvm/ApiCheck.kt, tests/test_kit_api.py): no
// process of its own. The writable index runs on jvm/JdbcIndexDb.kt (the xerial driver).
package dev.edgem3

import java.io.File

/** `block` throws exactly `kind` (its class the one generated for it) with `contains` in its message. */
private fun Cases.refuses(name: String, kind: EdgeM3ErrorKind, contains: String, block: () -> Unit) =
    case(name) { refusal(kind, contains, block) }

/** Null when `block` throws the kit's exception of `kind` whose message holds `contains`; else what it did. */
private fun refusal(kind: EdgeM3ErrorKind, contains: String, block: () -> Unit): String? {
    return try {
        block()
        "no exception, expected $kind"
    } catch (exc: Throwable) {
        val want = EdgeM3Exception.of(kind, "m").javaClass
        when {
            exc !is EdgeM3Failure -> "threw ${exc.javaClass.name}: ${exc.message}; expected $kind"
            exc.kind != kind -> "kind ${exc.kind} (${exc.message}), expected $kind"
            exc.javaClass != want -> "threw ${exc.javaClass.simpleName}, expected ${want.simpleName}"
            contains !in (exc.message ?: "") -> "message \"${exc.message}\" lacks \"$contains\""
            else -> null
        }
    }
}

private fun sql(folder: File, vararg statements: String) {
    JdbcIndexDbDriver.open(File(folder, EdgeM3Contract.INDEX_DB), false).use { d ->
        for (s in statements) d.execute(s, emptyList())
    }
}

internal fun refusalChecks(work: File, truth: LocalBundle, want: List<Embedding>, ctx: FolderContext,
                           embedder: () -> EdgeM3Embedder, cases: Cases) {
    writableChecks(File(work, "writable"), truth, want, embedder, cases)
    extractAssetChecks(File(work, "extract"), truth, ctx, cases)
    tokenizerChecks(truth, cases)
    manifestRuleChecks(truth, cases)
}

private fun writableChecks(work: File, truth: LocalBundle, want: List<Embedding>, embedder: () -> EdgeM3Embedder,
                           cases: Cases) {
    work.mkdirs()
    val db = JdbcIndexDbDriver
    val v = want.map { Retrieval.Vectors.of(it) }
    val dim = want[0].denseVecs!!.size
    val colbert = if (want[0].colbertVecs != null) "fp16" else "none"
    var n = 0
    fun folder(): File = File(work, "i${n++}")
    fun fresh(dense: String = "float32", bundle: Map<String, Any?>? = null): EdgeM3WritableIndex =
        EdgeM3WritableIndex.create(folder(), dim, dense, colbert, bundle, db)
    val identity = mapOf("model_file" to truth.model.file, "model_sha256" to truth.modelEntry.sha256,
        "tokenizer_file" to truth.manifest.tokenizer.file,
        "tokenizer_sha256" to truth.manifest.files[truth.manifest.tokenizer.file]!!.sha256, "quant" to truth.manifest.quant)
    val files = truth.manifest.files.mapValues { it.value.sha256 }

    // create's refusals
    val maxDim = EdgeM3Contract.INDEX_MAX_DIM
    cases.refuses("writable-create-dim", EdgeM3ErrorKind.INVALID_INPUT, "dim: must be from 1 to $maxDim, got 0") {
        EdgeM3WritableIndex.create(folder(), 0, "float32", "none", null, db)
    }
    cases.refuses("writable-create-dim-past-max", EdgeM3ErrorKind.INVALID_INPUT, "dim: must be from 1 to $maxDim, got ${maxDim + 1}") {
        EdgeM3WritableIndex.create(folder(), maxDim + 1, "float32", "none", null, db)
    }
    cases.refuses("writable-create-dense", EdgeM3ErrorKind.INVALID_INPUT, "dense store f8 unknown") {
        EdgeM3WritableIndex.create(folder(), dim, "f8", "none", null, db)
    }
    cases.refuses("writable-create-colbert", EdgeM3ErrorKind.INVALID_INPUT, "colbert store f8 unknown") {
        EdgeM3WritableIndex.create(folder(), dim, "float32", "f8", null, db)
    }
    cases.refuses("writable-create-bundle-key", EdgeM3ErrorKind.INVALID_INPUT, "bundle: needs model_sha256 (a string)") {
        EdgeM3WritableIndex.create(folder(), dim, "float32", "none", mapOf("model_file" to "m"), db)
    }
    val twice = folder()
    cases.refuses("writable-create-twice", EdgeM3ErrorKind.INVALID_INPUT, "already holds an index") {
        EdgeM3WritableIndex.create(twice, dim, "float32", "none", null, db).close()
        EdgeM3WritableIndex.create(twice, dim, "float32", "none", null, db).close()
    }
    val aFile = File(work, "a-file").also { it.writeText("x") }
    cases.refuses("writable-create-unwritable", EdgeM3ErrorKind.WRITE_FAILED, "cannot create the folder") {
        EdgeM3WritableIndex.create(File(aFile, "sub"), dim, "float32", "none", null, db)
    }
    cases.case("index-db-bind-refused") {  // IndexDb.kt's bindArgs, shared with AndroidIndexDb.kt
        db.open(File(work, "bind.sqlite"), true).use { d ->
            try {
                d.execute("SELECT ?", listOf(1))
                "bound an Int"
            } catch (e: IndexDbException) {
                if (e.code != IndexDbException.ERROR || e.message != "cannot bind a Integer") "${e.code}: ${e.message}" else null
            }
        }
    }

    // ids and rows
    fresh().use { x ->
        cases.refuses("writable-id-type", EdgeM3ErrorKind.INVALID_INPUT, "id 1.5: must be an integer or a string") {
            x.add(PassageId.from(1.5), v[0])
        }
        cases.case("writable-id-widths") {
            x.add(PassageId.from(7), v[0])
            x.add(PassageId.from(8.toShort()), v[1])
            x.add(PassageId.from(9.toByte()), v[2])
            val ids = (0 until x.rows).map { x.id(it) }
            if (ids != listOf(7L, 8L, 9L).map { PassageId.of(it) } || x.ids() != ids || !x.contains(PassageId.of(8)) ||
                x.contains(PassageId.of("8")) || x.chunk(2) != 0) "ids $ids" else null
        }
        cases.refuses("writable-row-range", EdgeM3ErrorKind.INVALID_INPUT, "row 3: the index has 3") { x.id(3) }
        cases.refuses("writable-chunk-range", EdgeM3ErrorKind.INVALID_INPUT, "row -1: the index has 3") { x.chunk(-1) }
        cases.refuses("writable-no-chunks", EdgeM3ErrorKind.INVALID_INPUT, "id \"e\": no chunks") {
            x.add(PassageId.of("e"), listOf<Retrieval.Vectors>())
        }
        val lex = v[0].lexical
        cases.refuses("writable-no-dense", EdgeM3ErrorKind.INVALID_INPUT, "id \"d\": no dense_vecs") {
            x.add(PassageId.of("d"), Retrieval.Vectors(null, lex, v[0].colbert))
        }
        cases.refuses("writable-dense-dim", EdgeM3ErrorKind.INVALID_INPUT, "dense_vecs of 1 values (want $dim, finite)") {
            x.add(PassageId.of("d"), Retrieval.Vectors(floatArrayOf(1f), lex, v[0].colbert))
        }
        cases.refuses("writable-dense-nan", EdgeM3ErrorKind.INVALID_INPUT, "(want $dim, finite)") {
            x.add(PassageId.of("d"), Retrieval.Vectors(FloatArray(dim) { Float.NaN }, lex, v[0].colbert))
        }
        cases.refuses("writable-lexical-zero", EdgeM3ErrorKind.INVALID_INPUT, "lexical weights must be finite and > 0") {
            x.add(PassageId.of("d"), Retrieval.Vectors(v[0].dense, Retrieval.Lexical(intArrayOf(5), floatArrayOf(0f)), v[0].colbert))
        }
        if (colbert != "none") {
            cases.refuses("writable-no-colbert", EdgeM3ErrorKind.INVALID_INPUT, "no colbert_vecs (the index stores ColBERT)") {
                x.add(PassageId.of("d"), Retrieval.Vectors(v[0].dense, lex, null))
            }
            cases.refuses("writable-colbert-dim", EdgeM3ErrorKind.INVALID_INPUT, "colbert_vecs rows must have $dim finite values") {
                x.add(PassageId.of("d"), Retrieval.Vectors(v[0].dense, lex, arrayOf(floatArrayOf(1f))))
            }
        }
        cases.refuses("writable-batch-twice", EdgeM3ErrorKind.DUPLICATE_ID, "given twice in one batch") {
            x.addAll(listOf(Pair(PassageId.of(20), v[0]), Pair(PassageId.of(20L), v[1])))
        }
        cases.refuses("writable-batch-present", EdgeM3ErrorKind.DUPLICATE_ID, "id 7: already in the index") {
            x.addAll(listOf(Pair(PassageId.of(21), v[0]), Pair(PassageId.of(7), v[1])))
        }
        cases.refuses("writable-update-unknown", EdgeM3ErrorKind.UNKNOWN_ID, "id 99: not in the index") { x.update(PassageId.of(99), v[0]) }
        cases.refuses("writable-remove-unknown", EdgeM3ErrorKind.UNKNOWN_ID, "id \"z\": not in the index") { x.remove(PassageId.of("z")) }
        cases.refuses("writable-text-no-embedder", EdgeM3ErrorKind.INVALID_INPUT, "set `embedder`") { x.add(PassageId.of("t"), "a text") }
        cases.refuses("writable-update-text-no-embedder", EdgeM3ErrorKind.INVALID_INPUT, "set `embedder`") {
            x.update(PassageId.of(7), "a text")
        }
        // removeAll (Python's remove_many): all or nothing; search(text) needs the embedder
        cases.case("writable-nothing-changed") {
            refusal(EdgeM3ErrorKind.UNKNOWN_ID, "id \"z\": not in the index") { x.removeAll(listOf(PassageId.of(7), PassageId.of("z"))) }
                ?: refusal(EdgeM3ErrorKind.UNKNOWN_ID, "an id is removed twice in one batch") {
                    x.removeAll(listOf(PassageId.of(7), PassageId.of(7)))
                }
                ?: refusal(EdgeM3ErrorKind.INVALID_INPUT, "search(text): set `embedder`") { x.search("a text", 1, "dense") }
                ?: if (x.count != 3 || x.rows != 3) "count ${x.count}, rows ${x.rows}" else null
        }
        cases.case("writable-update-one-vector") {
            x.update(PassageId.of(7), v[3])
            if (x.rows != 3 || x.id(2) != PassageId.of(7)) "rows ${x.rows}, last ${x.id(2)}" else null
        }
        // a table gone under an open index: the write's reload fails in SQLite (ERROR), refused as a corrupt index
        cases.refuses("writable-write-sql-error", EdgeM3ErrorKind.CORRUPT_INDEX, "no such table") {
            sql(x.dir, "DROP TABLE removed")
            x.add(PassageId.of(30), v[0])
        }
    }

    // the text API: embedChunks through the bundle's embedder, live
    val long = "BGE-M3 on a phone. ".repeat(12)
    cases.case("writable-text-embedded") {
        embedder().use { e ->
            fresh(bundle = identity).use { x ->
                x.embedder = e
                val chunks = e.embedChunksBlocking(long)
                x.add(PassageId.of("t"), long)
                x.add(PassageId.of("u"), "short")
                x.update(PassageId.of("u"), long)
                val stored = (0 until x.rows).filter { x.id(it) == PassageId.of("t") }.map { x.chunk(it) }
                val byText = x.search("short", 2, "dense").joinToString()
                val byVectors = x.search(Retrieval.Vectors.of(e.embedBlocking("short")), 2, "dense").joinToString()
                val ids = x.ids()
                val n = x.rows
                val c = x.count
                x.removeAll(listOf(PassageId.of("u"), PassageId.of("t")))
                when {
                    byText != byVectors -> "search(text) $byText, search(its vectors) $byVectors"
                    ids != listOf(PassageId.of("t"), PassageId.of("u")) || x.count != 0 || x.rows != 0 -> "ids $ids, after removeAll ${x.count}"
                    chunks.size < 2 -> "the text made ${chunks.size} chunk, expected several"
                    n != 2 * chunks.size || c != 2 -> "rows $n, count $c, chunks ${chunks.size}"
                    stored != chunks.indices.toList() -> "chunks stored $stored"
                    x.embedder !== e || x.bundle?.get("model_sha256") != truth.modelEntry.sha256 -> "embedder or bundle not kept"
                    else -> null
                }
            }
        }
    }

    // a closed index refuses everything as closed
    val closed = fresh().also { it.add(PassageId.of(1), v[0]); it.close(); it.close() }
    cases.refuses("writable-closed-count", EdgeM3ErrorKind.RUNNER_CLOSED, "EdgeM3WritableIndex is closed") { closed.count }
    cases.refuses("writable-closed-add", EdgeM3ErrorKind.RUNNER_CLOSED, "EdgeM3WritableIndex is closed") { closed.add(PassageId.of(2), v[1]) }
    cases.refuses("writable-closed-search", EdgeM3ErrorKind.RUNNER_CLOSED, "EdgeM3WritableIndex is closed") {
        closed.search(v[0], 1, "dense")
    }

    // the ScoreMode overloads (and the default arguments) answer as the strings, on both indexes
    val scored = folder()
    EdgeM3WritableIndex.create(scored, dim, "float32", colbert, identity, db).use { x ->
        for (i in v.indices) x.add(PassageId.of(i), v[i])
        x.compact()
        x.add(PassageId.of("after"), v[1])
        x.remove(PassageId.of(0))
    }
    fun hits(h: List<EdgeM3Index.Hit>) = h.joinToString { "${it.row}/${it.id}/${it.chunk}/${it.score.toRawBits()}" }
    fun hitsW(h: List<EdgeM3WritableIndex.Hit>) = h.joinToString { "${it.row}/${it.id}/${it.chunk}/${it.score.toRawBits()}" }
    val modes = ScoreMode.values().filter { m ->
        !(m.wire.contains("colbert") && colbert == "none") && !(m.wire.contains("sparse") && v[0].lexical == null)
    }
    cases.case("writable-score-mode-overloads") {
        EdgeM3WritableIndex.open(scored, db, files).use { x ->
            val w = doubleArrayOf(0.4, 0.2, 0.4)
            modes.mapNotNull { m ->
                val a = listOf(x.search(want[2], 3, m), x.search(v[2], 3, m), x.search(want[2], 3, m, w, true), x.search(v[2], 3, m, w))
                val b = listOf(x.search(want[2], 3, m.wire), x.search(v[2], 3, m.wire), x.search(want[2], 3, m.wire, w, true),
                    x.search(v[2], 3, m.wire, w))
                if (a.map(::hitsW) != b.map(::hitsW)) "${m.wire}: ${a.map(::hitsW)} vs ${b.map(::hitsW)}" else null
            }.firstOrNull()
        }
    }
    // A hit carries its passage's id, read with its row: another writer's commit renumbers the rows,
    // and id(row) after it names another passage (or none).
    cases.case("writable-hit-id-survives-another-writer") {
        val dir = folder()
        EdgeM3WritableIndex.create(dir, dim, "float32", colbert, identity, db).use { x ->
            for (i in v.indices) x.add(PassageId.of(i), v[i])
            val hits = x.search(v[v.size - 1], v.size, "dense", chunks = true)
            val then = hits.map { x.id(it.row) }
            EdgeM3WritableIndex.open(dir, db, files).use { it.remove(PassageId.of(0)) }
            val rows = x.rows  // reloads the other connection's commit
            val now = hits.map { h -> try { x.id(h.row) } catch (e: EdgeM3Exception) { null } }
            when {
                hits.size != v.size || rows != v.size - 1 -> "${hits.size} hits, $rows rows"
                hits.map { it.id } != then -> "hit ids ${hits.map { it.id }}, rows' ids at the search $then"
                now == then -> "no row was renumbered: the case proves nothing"
                else -> null
            }
        }
    }
    cases.case("index-score-mode-overloads") {
        val ix = EdgeM3Index.open(File(scored, EdgeM3Contract.INDEX_BASE_PREFIX + "1"), files)
        val w = doubleArrayOf(0.4, 0.2, 0.4)
        modes.mapNotNull { m ->
            val a = listOf(ix.search(want[2], 3, m), ix.search(v[2], 3, m), ix.search(want[2], 3, m, w, true), ix.search(v[2], 3, m, w))
            val b = listOf(ix.search(want[2], 3, m.wire), ix.search(v[2], 3, m.wire), ix.search(want[2], 3, m.wire, w, true),
                ix.search(v[2], 3, m.wire, w))
            if (a.map(::hits) != b.map(::hits)) "${m.wire}: ${a.map(::hits)} vs ${b.map(::hits)}" else null
        }.firstOrNull() ?: if (ix.maxChunks != 1 || ix.passages != ix.count || ix.id(0) != PassageId.of(0) || ix.search(v[1], 1, "dense").single().toString() != "Hit(row=1, id=1, chunk=0, score=" +
            "${ix.search(v[1], 1, "dense").single().score})") "ids ${ix.ids.toList()}" else null
    }
    cases.refuses("writable-open-another-bundle", EdgeM3ErrorKind.INVALID_INPUT, "index built by another bundle") {
        EdgeM3WritableIndex.open(scored, db, files + (truth.model.file to "0".repeat(64))).close()
    }
    // spoiled databases and index folders: tests/conformance/index/ (jvm/conformance/IndexConformanceTest.kt)
}

/** Manifest rules no bundle breaks: a special-token key, a signature too short for <s> and </s>. */
internal fun manifestRuleChecks(truth: LocalBundle, cases: Cases) {
    cases.refuses("manifest-special-key", EdgeM3ErrorKind.INVALID_INPUT, "unknown special token key sep") {
        truth.manifest.tokenizer.special["sep"]
    }
    cases.refuses("manifest-signature-too-short", EdgeM3ErrorKind.INVALID_INPUT, "signature s1: seq_len 1 < 2") {
        ModelEntry("tflite", "m.tflite", "fp32", listOf(Signature("s1", 1, emptyList(), emptyList())))
    }
    cases.refuses("options-gpu-off", EdgeM3ErrorKind.INVALID_INPUT, "accelerator GPU: needs LiteRT's CompiledModel") {
        EdgeM3Embedder.fromDirectory(truth.dir, weightCache = WeightCache.Off, accelerator = EdgeM3Accelerator.GPU)
    }
    cases.case("line-breaks-escaped") {
        val m = EdgeM3Exception("a\nb\rc").message
        if (m != "a\\nb\\rc") "message \"$m\"" else null
    }
}

/** extractAsset: the copy's size or SHA-256 not the manifest's is a corrupt bundle, and nothing is left behind. */
private fun extractAssetChecks(work: File, truth: LocalBundle, ctx: FolderContext, cases: Cases) {
    val path = "${EdgeM3Contract.ASSET_DIR}/${truth.model.file}"
    val entry = truth.modelEntry
    fun entry(size: Long, sha: String) = FileEntry.fromJson(mapOf("size" to size, "sha256" to sha))
    cases.refuses("extract-asset-size", EdgeM3ErrorKind.CORRUPT_BUNDLE, "manifest.json says ${entry.size + 1} bytes") {
        EdgeM3Embedder.extractAsset(ctx.assets, path, entry(entry.size + 1, entry.sha256), File(work, "size"))
    }
    cases.refuses("extract-asset-sha256", EdgeM3ErrorKind.CORRUPT_BUNDLE, "sha256 ${entry.sha256}; manifest.json says") {
        EdgeM3Embedder.extractAsset(ctx.assets, path, entry(entry.size, "0".repeat(64)), File(work, "sha"))
    }
    cases.case("extract-asset-nothing-left") {
        val left = listOf("size", "sha").flatMap { File(work, it).list()?.toList() ?: emptyList() }
        val good = EdgeM3Embedder.extractAsset(ctx.assets, path, entry, File(work, "good"))
        when {
            left.isNotEmpty() -> "left behind: $left"
            good.length() != entry.size -> "the good copy has ${good.length()} bytes"
            EdgeM3Embedder.extractAsset(ctx.assets, path, entry, File(work, "good")) != good -> "not reused"
            else -> null
        }
    }
}

/** The tokenizers' refusals of a corrupt file or spec, each naming the file (EdgeM3Exception, INVALID_INPUT). */
private fun tokenizerChecks(truth: LocalBundle, cases: Cases) {
    val bad = EdgeM3ErrorKind.INVALID_INPUT
    val special = SpecialIds(0, 1, 2, 3, 4)
    val wpOptions = WordPieceOptions(true, true, true, true, "##", 100)
    val bpeOptions = BpeOptions("", false, true, false, false, "<unk>")
    fun spec(kind: String, file: String, wp: WordPieceOptions? = null, bpe: BpeOptions? = null, vocabMap: String? = null,
             idOffset: Int = 0) = TokenizerSpec(file, special, spUnkId = 3, idOffset = idOffset, vocabSize = 8,
        vocabMapFile = vocabMap, kind = kind, options = wp, bpeOptions = bpe)
    fun bytes(vararg b: Int) = ByteArray(b.size) { b[it].toByte() }
    // SentencePiece's protobuf reader
    val sp = EdgeM3Contract.SENTENCEPIECE
    for ((name, pair) in listOf(
        "sp-empty" to (bytes() to "no pieces"),
        "sp-field-zero" to (bytes(0x00, 0x00) to "field number 0 at byte 0"),
        "sp-truncated-varint" to (bytes(0x28, 0x80) to "truncated varint at byte 1"),
        "sp-wire-type" to (bytes(0x2b) to "wire type 3 at byte 1"),
        "sp-pieces-wire" to (bytes(0x08, 0x01) to "pieces (field 1) has wire type 0, expected 2"),
        "sp-length-past-end" to (bytes(0x0a, 0x05, 0x00) to "length 5 past the end at byte 1"),
        "sp-fixed-past-end" to (bytes(0x21, 0x00) to "field past the end at byte 1"),
        "sp-skips-unknown" to (bytes(0x20, 0x01, 0x2d, 0, 0, 0, 0, 0x31, 0, 0, 0, 0, 0, 0, 0, 0, 0x3a, 0x00) to "no pieces"))) {
        cases.refuses("tokenizer-$name", bad, "$sp: not a SentencePiece model (${pair.second})") {
            SentencePieceModel.parse(pair.first, sp)
        }
    }
    // each kind's tokenizer, from bytes that are not its file or a spec of another kind
    cases.refuses("tokenizer-xlmr-garbage", bad, "$sp: not a SentencePiece model") {
        XlmrTokenizer(bytes(0x0b, 0x0b), spec(EdgeM3Contract.XLMR_SENTENCEPIECE, sp))
    }
    val vocab = EdgeM3Contract.WORDPIECE_VOCAB
    cases.refuses("tokenizer-wordpiece-kind", bad, "tokenizer kind '${EdgeM3Contract.BYTE_LEVEL_BPE}' is not '${EdgeM3Contract.WORDPIECE}'") {
        WordPieceTokenizer(bytes(0x61), spec(EdgeM3Contract.BYTE_LEVEL_BPE, vocab, wpOptions))
    }
    cases.refuses("tokenizer-wordpiece-no-options", bad, "tokenizer options missing (required for kind wordpiece)") {
        WordPieceTokenizer(bytes(0x61), spec(EdgeM3Contract.WORDPIECE, vocab))
    }
    cases.refuses("tokenizer-wordpiece-vocab-map", bad, "vocab_map must be null for a WordPiece vocabulary") {
        WordPieceTokenizer(bytes(0x61), spec(EdgeM3Contract.WORDPIECE, vocab, wpOptions, vocabMap = EdgeM3Contract.VOCAB_MAP))
    }
    cases.refuses("tokenizer-wordpiece-not-utf8", bad, "$vocab: not UTF-8") {
        WordPieceTokenizer(bytes(0xff, 0xfe, 0x0a), spec(EdgeM3Contract.WORDPIECE, vocab, wpOptions))
    }
    cases.refuses("tokenizer-wordpiece-empty-line", bad, "$vocab: vocabulary line 2 '' is empty or holds a line break") {
        WordPieceTokenizer("a\n\nb\n".toByteArray(), spec(EdgeM3Contract.WORDPIECE, vocab, wpOptions))
    }
    cases.refuses("tokenizer-wordpiece-repeat", bad, "$vocab: vocabulary line 2 'a' repeats line 1") {
        WordPieceTokenizer("a\na\n".toByteArray(), spec(EdgeM3Contract.WORDPIECE, vocab, wpOptions))
    }
    cases.refuses("tokenizer-wordpiece-size", bad, "$vocab: 2 tokens, but the manifest says vocab_size 8") {
        WordPieceTokenizer("a\nb\n".toByteArray(), spec(EdgeM3Contract.WORDPIECE, vocab, wpOptions))
    }
    val bpe = EdgeM3Contract.BPE_FILE
    cases.refuses("tokenizer-bpe-kind", bad, "tokenizer kind '${EdgeM3Contract.WORDPIECE}' is not '${EdgeM3Contract.BYTE_LEVEL_BPE}'") {
        BpeTokenizer("{}".toByteArray(), spec(EdgeM3Contract.WORDPIECE, bpe, bpe = bpeOptions))
    }
    cases.refuses("tokenizer-bpe-no-options", bad, "tokenizer options missing (required for kind ${EdgeM3Contract.BYTE_LEVEL_BPE})") {
        BpeTokenizer("{}".toByteArray(), spec(EdgeM3Contract.BYTE_LEVEL_BPE, bpe))
    }
    cases.refuses("tokenizer-bpe-normalizer", bad, "tokenizer options.normalizer 'NFKC' unknown") {
        BpeTokenizer("{}".toByteArray(), spec(EdgeM3Contract.BYTE_LEVEL_BPE, bpe,
            bpe = BpeOptions("NFKC", false, true, false, false, "<unk>")))
    }
    cases.refuses("tokenizer-bpe-id-offset", bad, "vocab_map must be null and id_offset 0 for a byte-level BPE tokenizer") {
        BpeTokenizer("{}".toByteArray(), spec(EdgeM3Contract.BYTE_LEVEL_BPE, bpe, bpe = bpeOptions, idOffset = 1))
    }
    cases.refuses("tokenizer-bpe-not-utf8", bad, "$bpe: not valid JSON (not UTF-8)") {
        BpeTokenizer(bytes(0xff, 0xfe), spec(EdgeM3Contract.BYTE_LEVEL_BPE, bpe, bpe = bpeOptions))
    }
    cases.refuses("tokenizer-bpe-not-json", bad, "$bpe: not valid JSON (JSON: expected a key at offset 1)") {
        BpeTokenizer("{".toByteArray(), spec(EdgeM3Contract.BYTE_LEVEL_BPE, bpe, bpe = bpeOptions))
    }
    cases.refuses("tokenizer-bpe-no-vocab", bad, "$bpe: vocab is missing or not a list") {
        BpeTokenizer("{}".toByteArray(), spec(EdgeM3Contract.BYTE_LEVEL_BPE, bpe, bpe = bpeOptions))
    }
    // XLM-R's model checks, on hand-written models: <unk>, <s>, </s> first (types UNKNOWN, CONTROL), then pieces
    val head = listOf(Triple("<unk>", 0f, SentencePieceModel.UNKNOWN), Triple("<s>", 0f, SentencePieceModel.CONTROL),
        Triple("</s>", 0f, SentencePieceModel.CONTROL))
    fun normal(vararg s: String) = s.mapIndexed { i, p -> Triple(p, -1f - i, SentencePieceModel.NORMAL) }
    val xlmr = spec(EdgeM3Contract.XLMR_SENTENCEPIECE, sp, idOffset = 1)
    cases.refuses("tokenizer-xlmr-no-unk", bad, "expected exactly one <unk> piece, at id 0") {
        XlmrTokenizer(spModel(normal("a", "b", "c")), xlmr)
    }
    cases.refuses("tokenizer-xlmr-duplicate-piece", bad, "piece \"a\" occurs twice in the model") {
        XlmrTokenizer(spModel(head + normal("a", "a")), xlmr)
    }
    cases.refuses("tokenizer-xlmr-past-vocab", bad, "8 pieces map past the manifest's vocab_size 8") {
        XlmrTokenizer(spModel(head + normal("a", "b", "c", "d", "e")), xlmr)
    }
    cases.refuses("tokenizer-xlmr-special-outside", bad, "tokenizer special_ids {'mask': 9} lie outside vocab_size 8") {
        XlmrTokenizer(spModel(head + normal("a")), TokenizerSpec(sp, SpecialIds(0, 1, 2, 3, 9), spUnkId = 3, idOffset = 1,
            vocabSize = 8))
    }
    cases.refuses("tokenizer-xlmr-control-past-eos", bad, "control or user-defined pieces past </s>: [3]") {
        XlmrTokenizer(spModel(head + listOf(Triple("x", 0f, SentencePieceModel.CONTROL))), xlmr)
    }
    cases.refuses("tokenizer-open-unknown-kind", bad, "tokenizer.kind") {
        EdgeM3Tokenizer.open(spec("sentencepiece-bpe", sp)) { ByteArray(0) }
    }
    cases.case("tokenizer-open-each-kind") {
        // the bundle's own files through EdgeM3Tokenizer.open, its ids those of the loaded tokenizer
        val t = EdgeM3Tokenizer.open(truth.manifest.tokenizer) { File(truth.dir, it).readBytes() }
        val a = t.encode("BGE-M3 on a phone.").toList()
        val b = truth.tokenizer.encode("BGE-M3 on a phone.").toList()
        if (a != b || t.modelRows(t.encode("x")).isEmpty()) "ids $a, expected $b" else null
    }
}

/** A SentencePiece model in protobuf wire format: each piece (text, score, type) as ModelProto.pieces. */
private fun spModel(pieces: List<Triple<String, Float, Int>>): ByteArray {
    fun varint(v: Int): List<Int> {
        var x = v
        val out = ArrayList<Int>()
        while (x >= 0x80) { out.add(x and 0x7F or 0x80); x = x ushr 7 }
        out.add(x)
        return out
    }
    val out = ArrayList<Int>()
    for ((text, score, type) in pieces) {
        val t = text.toByteArray(Charsets.UTF_8).map { it.toInt() and 0xFF }
        val bits = java.lang.Float.floatToIntBits(score)
        val body = listOf(0x0A) + varint(t.size) + t +
            listOf(0x15, bits and 0xFF, (bits ushr 8) and 0xFF, (bits ushr 16) and 0xFF, (bits ushr 24) and 0xFF) +
            listOf(0x18) + varint(type)
        out += listOf(0x0A) + varint(body.size) + body
    }
    return ByteArray(out.size) { out[it].toByte() }
}
