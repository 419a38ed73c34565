package dev.edgem3

// The kit's tokenizers behind one interface: one class per manifest `tokenizer.kind`
// (EdgeM3Contract.TOKENIZER_KINDS, from edge_m3/spec/names.py), chosen by `EdgeM3Tokenizer.open`, the
// one place that names them (as edge_m3.tokenizer.open_tokenizer in Python). What every kind shares
// is here too: the text's code points (a lone surrogate refused as Python refuses it), the split on
// the special-token strings, `bos ... eos` and truncation keeping `eos`.
// ios_assets/Sources/EdgeM3/Tokenizer/EdgeM3Tokenizer.swift is the same for the Swift kit.

/**
 * `encode(text, maxLength)` -> the bundle's token ids, `bos ... eos`, exactly as the Python pipeline
 * gives them (tests/test_kit_tokenizer.py). Immutable after construction: safe to share between threads.
 */
interface EdgeM3Tokenizer {
    /** The manifest's `tokenizer` entry this tokenizer was built from. */
    val spec: TokenizerSpec

    /** vocab_map.json of a trimmed bundle (XLM-R bundles only), null for the full vocabulary. */
    val vocab: VocabMap?

    /**
     * Original-vocabulary ids, `bos`/`eos` added; truncation to `maxLength` keeps `eos`.
     * Lone surrogates and `maxLength` below 2 are refused with the Python pipeline's messages.
     */
    fun encode(text: String, maxLength: Int? = null): IntArray

    /**
     * The text's chunks for signatures of `maxLength` (docs/index-format.md, "Passages and
     * chunks"; Python's `Tokenizer.encode_chunks`): the ids of `encode(text)` with no length limit
     * but the first and the last, in windows of `W = maxLength - 2` tokens, each next one `W -
     * overlap` tokens on until one reaches the end, each window between the first and the last
     * id. `overlap` defaults to `W * CHUNK_OVERLAP_PERCENT / 100` and must be `0 <= overlap < W`;
     * `maxLength` below 3 is refused. The first chunk is `encode(text, maxLength)`.
     */
    fun encodeChunks(text: String, maxLength: Int, overlap: Int? = null): List<IntArray> {
        val ids = encode(text)
        if (maxLength < 3) throw EdgeM3Exception("max_length $maxLength: chunks need an integer of at least 3")
        val first = ids[0]
        val last = ids[ids.size - 1]
        return chunkSpans(ids.size - 2, maxLength, overlap).map { (from, to) ->
            val chunk = IntArray(to - from + 2)
            chunk[0] = first
            System.arraycopy(ids, 1 + from, chunk, 1, to - from)
            chunk[chunk.size - 1] = last
            chunk
        }
    }

    /** Rows of the (possibly trimmed) embedding table; a copy of `ids` for a full vocabulary. */
    fun modelRows(ids: IntArray): IntArray = vocab?.rows(ids) ?: ids.copyOf()

    companion object {
        /**
         * The tokenizer of `spec.kind` over the bundle's files, which `read(name)` gives (an asset, a
         * file on disk): `spec.file`, and vocab_map.json when the spec names one.
         */
        fun open(spec: TokenizerSpec, read: (String) -> ByteArray): EdgeM3Tokenizer = when (spec.kind) {
            EdgeM3Contract.XLMR_SENTENCEPIECE -> {
                val vocab = spec.vocabMapFile?.let { VocabMap.fromJson(MiniJson.parse(String(read(it), Charsets.UTF_8)), spec) }
                XlmrTokenizer(read(spec.file), spec, vocab)
            }
            EdgeM3Contract.WORDPIECE -> WordPieceTokenizer(read(spec.file), spec)
            EdgeM3Contract.BYTE_LEVEL_BPE -> BpeTokenizer(read(spec.file), spec)
            else -> throw unknownTokenizerKind(spec.kind, "${EdgeM3Contract.MANIFEST}: tokenizer.kind")
        }
    }
}

/**
 * `[from, to)` of each window over `n` content tokens for signatures of `maxLength` (Python's
 * `chunk_spans`): `W = maxLength - 2` tokens each, starts 0, `W - overlap`, ... while the window
 * before ends short of `n`.
 */
internal fun chunkSpans(n: Int, maxLength: Int, overlap: Int?): List<Pair<Int, Int>> {
    val width = maxLength - 2
    val o = overlap ?: width * EdgeM3Contract.CHUNK_OVERLAP_PERCENT / 100
    if (o < 0 || o >= width) {
        throw EdgeM3Exception("chunk overlap $o: must be an integer from 0 to ${width - 1} (windows of $width tokens)")
    }
    val out = ArrayList<Pair<Int, Int>>()
    var start = 0
    while (true) {
        out.add(Pair(start, minOf(start + width, n)))
        if (start + width >= n) return out
        start += width - o
    }
}

/** The text's code points; a lone surrogate is refused as edge_m3.tokenizer.check_text does. */
internal fun checkedCodePoints(text: String): IntArray {
    val out = IntArray(text.length)
    var n = 0
    var i = 0
    while (i < text.length) {
        val c = text[i]
        if (Character.isHighSurrogate(c) && i + 1 < text.length && Character.isLowSurrogate(text[i + 1])) {
            out[n++] = Character.toCodePoint(c, text[i + 1])
            i += 2
        } else if (Character.isSurrogate(c)) {
            throw EdgeM3Exception("text is not valid Unicode (lone surrogate at index $n)")
        } else {
            out[n++] = c.code
            i++
        }
    }
    return out.copyOf(n)
}

/** A string's code points (a valid one: the manifest's and the vocabulary's strings). */
internal fun codePointsOf(s: String): IntArray {
    val out = IntArray(s.length)
    var n = 0
    var i = 0
    while (i < s.length) {
        val cp = s.codePointAt(i)
        out[n++] = cp
        i += Character.charCount(cp)
    }
    return out.copyOf(n)
}

/**
 * The steps every kind shares (edge_m3.tokenizer.tokenizer.Tokenizer.encode and _segments): the
 * special-token strings found in the raw text, leftmost and longest first, become their ids, the
 * text between goes to the kind's own `pieces`; `bos` and `eos` around, truncation keeps `eos`.
 */
internal class SpecialSplit(pairs: List<Pair<String, Int>>, private val bos: Int, private val eos: Int) {
    private val specialCps: Array<IntArray>
    private val specialIds: IntArray

    init {
        // The last key wins for a repeated string, longest first (a stable sort, as Python's).
        val specials = LinkedHashMap<String, Int>()
        for ((string, id) in pairs) if (string.isNotEmpty()) specials[string] = id
        val ordered = specials.entries.map { codePointsOf(it.key) to it.value }.sortedByDescending { it.first.size }
        specialCps = Array(ordered.size) { ordered[it].first }
        specialIds = IntArray(ordered.size) { ordered[it].second }
    }

    /** `bos`, the ids of `text` (`pieces(cps, from, to, out)` between the specials), `eos`; truncated. */
    fun encode(text: String, maxLength: Int?, pieces: (IntArray, Int, Int, IntList) -> Unit): IntArray {
        val cps = checkedCodePoints(text)
        if (maxLength != null && maxLength < 2) {
            throw EdgeM3Exception("max_length $maxLength: must be an integer of at least 2")
        }
        val out = IntList(cps.size + 2)
        out.add(bos)
        var from = 0
        var i = 0
        val n = cps.size
        while (i < n) {
            val k = matchAt(cps, i)
            if (k < 0) {
                i++
                continue
            }
            if (i > from) pieces(cps, from, i, out)
            out.add(specialIds[k])
            i += specialCps[k].size
            from = i
        }
        if (n > from) pieces(cps, from, n, out)
        out.add(eos)
        val ids = out.toArray()
        return if (maxLength == null) ids else EdgeM3Core.truncate(ids, maxLength, eos)
    }

    /** The index of the special string at `cps[i]` (the longest), or -1. */
    private fun matchAt(cps: IntArray, i: Int): Int {
        for (k in specialCps.indices) {
            val s = specialCps[k]
            if (s.size > cps.size - i) continue
            var same = true
            for (j in s.indices) if (cps[i + j] != s[j]) { same = false; break }
            if (same) return k
        }
        return -1
    }
}
