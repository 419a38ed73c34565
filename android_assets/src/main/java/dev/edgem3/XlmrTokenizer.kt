package dev.edgem3

import kotlin.math.min

// The device tokenizer in plain Kotlin (stdlib only). Its ids equal edge_m3.tokenizer.Tokenizer's,
// which equal the reference's (transformers' XLMRobertaTokenizer, what FlagEmbedding loads), on
// every text; CI checks that on the corpus, random text and every code point
// (tests/test_kit_tokenizer.py). Each step ports one Python module:
//   1. special-token strings in the raw text -> their ids, leftmost-longest (edge_m3/tokenizer.py;
//      SpecialSplit in EdgeM3Tokenizer.kt, shared with WordPieceTokenizer);
//   2. the model's precompiled charsmap one grapheme cluster at a time (edge_m3/normalizer.py), the
//      clusters cut by the reference's Unicode 16 rules (edge_m3/graphemes.py; the per-code-point
//      data is generated into TokenizerTables.kt, never taken from the phone's ICU);
//   3. split on Unicode whitespace, "▁" before each word, a new piece before every "▁";
//   4. the reference's unigram Viterbi and its tie rule (edge_m3/unigram.py), XLM-R's id mapping.
// Everything counts code points, as Python's str does: piece lengths, lattice positions, and the
// index in the lone-surrogate error. Immutable after construction, so safe to share between threads.
// ios_assets/Sources/EdgeM3/Tokenizer/XlmrTokenizer.swift is the same algorithm: change both together.

/** The special-token strings of the manifest's `special_tokens` (XLM-R's when absent). */
class SpecialTokens(val bos: String, val pad: String, val eos: String, val unk: String, val mask: String) {
    /** (string, id) in the manifest's key order: bos, pad, eos, unk, mask. */
    fun withIds(ids: SpecialIds): List<Pair<String, Int>> =
        listOf(bos to ids.bos, pad to ids.pad, eos to ids.eos, unk to ids.unk, mask to ids.mask)

    companion object {
        val XLMR = fromMap(TokenizerTables.DEFAULT_SPECIAL_TOKENS, "defaults")

        fun fromMap(m: Map<String, Any?>, where: String): SpecialTokens {
            fun s(k: String): String = JsonTree.str(JsonTree.field(m, k, where), "$where.$k")
            return SpecialTokens(s("bos"), s("pad"), s("eos"), s("unk"), s("mask"))
        }
    }
}

/**
 * `encode(text, maxLength)` -> XLM-R ids `<s> ... </s>`, exactly as the Python pipeline gives them.
 *
 * Built from the bundle's sentencepiece.bpe.model bytes and the manifest's tokenizer entry; `vocab`
 * (vocab_map.json of a trimmed bundle) only feeds `modelRows`.
 */
class XlmrTokenizer(modelBytes: ByteArray, override val spec: TokenizerSpec, override val vocab: VocabMap? = null) :
    EdgeM3Tokenizer {
    private val model = SentencePieceModel.parse(modelBytes, spec.file)
    private val charsmap: CharsMap? = if (model.charsmap.isEmpty()) null else CharsMap(model.charsmap, spec.file)
    private val table: PieceTable
    private val scores: DoubleArray
    private val unkScore: Double
    private val maxLen: Int
    private val idOf: IntArray
    private val split: SpecialSplit

    init {
        val n = model.size
        val where = "${spec.file}: not a SentencePiece model"
        var unknown = 0
        for (i in 0 until n) if (model.types[i] == SentencePieceModel.UNKNOWN) unknown++
        if (n < 3 || unknown != 1 || model.types[0] != SentencePieceModel.UNKNOWN) {
            throw EdgeM3Exception("$where (not an XLM-R-style model: expected exactly one <unk> piece, at id 0)")
        }
        val pairs = spec.specialTokens.withIds(spec.special)
        // The reference's vocabulary: fairseq's specials (pieces 0..2 here) at score 0, the pieces, then
        // the special strings the model lacks, also at score 0 (edge_m3.unigram.UnigramModel).
        val added = ArrayList<IntArray>()
        val t = PieceTable(model.codePoints, model.starts, n + pairs.size)
        for (i in 0 until n) {
            if (!t.add(i)) throw EdgeM3Exception("$where (piece ${quoted(model.piece(i))} occurs twice in the model)")
        }
        for ((string, _) in pairs) {
            val cps = codePointsOf(string)
            if (t.find(cps, 0, cps.size) < 0) {
                t.addExtra(n + added.size, cps)
                added.add(cps)
            }
        }
        table = t
        scores = DoubleArray(n + added.size) { if (it < 3 || it >= n) 0.0 else model.scores[it].toDouble() }
        var minScore = Double.POSITIVE_INFINITY
        for (s in scores) if (s < minScore) minScore = s
        unkScore = minScore - TokenizerTables.UNK_PENALTY
        var longest = 1
        for (i in 0 until n) longest = maxOf(longest, model.starts[i + 1] - model.starts[i])
        for (a in added) longest = maxOf(longest, a.size)
        maxLen = longest

        val top = n - 1 + spec.idOffset
        if (top >= spec.vocabSize) {
            throw EdgeM3Exception("${spec.file}: $n pieces map past the manifest's vocab_size ${spec.vocabSize} " +
                "(wrong SentencePiece model?)")
        }
        // The model's embedding table has vocab_size rows: a special id past it reads past it (issue 38;
        // edge_m3.tokenizer.Tokenizer refuses the same).
        val outside = EdgeM3Contract.SPECIAL_KEYS.filter { spec.special[it] !in 0 until spec.vocabSize }
        if (outside.isNotEmpty()) {
            throw EdgeM3Exception("${EdgeM3Contract.MANIFEST}: tokenizer special_ids " +
                outside.joinToString(", ", "{", "}") { "'$it': ${spec.special[it]}" } +
                " lie outside vocab_size ${spec.vocabSize}")
        }
        val odd = ArrayList<Int>()
        for (i in 3 until n) {
            val type = model.types[i]
            if (type == SentencePieceModel.CONTROL || type == SentencePieceModel.USER_DEFINED) odd.add(i)
        }
        if (odd.isNotEmpty() || spec.spUnkId != 0) {
            throw EdgeM3Exception("${spec.file}: not an XLM-R SentencePiece model (control or user-defined pieces " +
                "past </s>: ${odd.take(3)}, or <unk> not at id ${spec.spUnkId})")
        }
        // SentencePiece id (then the added specials) -> model id; the specials' strings map to their
        // ids wherever the reference's vocabulary holds them.
        idOf = IntArray(scores.size) { it + spec.idOffset }
        idOf[0] = spec.special.unk
        for ((string, id) in pairs) {
            val cps = codePointsOf(string)
            val p = table.find(cps, 0, cps.size)
            if (p >= 0) idOf[p] = id
        }
        // Special-token strings in the text -> their ids (the reference's added tokens).
        split = SpecialSplit(pairs, spec.special.bos, spec.special.eos)
    }

    /** `<s> ... </s>`: EdgeM3Tokenizer.encode. */
    override fun encode(text: String, maxLength: Int?): IntArray = split.encode(text, maxLength, this::words)

    /** Normalise `cps[from until to]`, split on whitespace, segment each word (edge_m3.unigram.encode_words). */
    private fun words(cps: IntArray, from: Int, to: Int, out: IntList) {
        val norm = IntList(to - from + 8)
        if (charsmap == null) norm.addRange(cps, from, to) else charsmap.normalize(cps, from, to, norm)
        val buf = norm.data
        val word = IntList(16)
        var i = 0
        val n = norm.size
        while (i < n) {
            while (i < n && isWhitespace(buf[i])) i++
            if (i >= n) break
            var j = i
            while (j < n && !isWhitespace(buf[j])) j++
            // "▁" before the word unless there; then a piece boundary before every "▁".
            word.clear()
            if (buf[i] != TokenizerTables.META) word.add(TokenizerTables.META)
            word.addRange(buf, i, j)
            val w = word.data
            var start = 0
            for (k in 1..word.size) {
                if (k == word.size || w[k] == TokenizerTables.META) {
                    viterbi(w, start, k, out)
                    start = k
                }
            }
            i = j
        }
    }

    /** Best segmentation of `w[s until e]`, tie for tie as the reference (edge_m3.unigram.encode_word). */
    private fun viterbi(w: IntArray, s: Int, e: Int, out: IntList) {
        val n = e - s
        val score = DoubleArray(n + 1)
        val startOf = IntArray(n + 1) { -1 }
        val pieceId = IntArray(n + 1)
        for (start in 0 until n) {
            val base = score[start]
            var single = false
            var h = 0
            val limit = min(n, start + maxLen)
            for (end in start + 1..limit) {
                h = 31 * h + w[s + end - 1]
                val pid = table.find(w, s + start, end - start, h)
                if (pid < 0) continue
                val cand = base + scores[pid]
                if (startOf[end] < 0 || cand > score[end]) {
                    score[end] = cand
                    startOf[end] = start
                    pieceId[end] = pid
                }
                if (end == start + 1) single = true
            }
            if (!single) {
                val end = start + 1
                val cand = base + unkScore
                if (startOf[end] < 0 || cand > score[end]) {
                    score[end] = cand
                    startOf[end] = start
                    pieceId[end] = 0
                }
            }
        }
        // Back from the end; runs of <unk> fuse into one.
        val rev = IntList(n)
        var end = n
        while (end > 0) {
            val pid = pieceId[end]
            if (!(pid == 0 && rev.size > 0 && rev.data[rev.size - 1] == 0)) rev.add(pid)
            end = startOf[end]
        }
        for (k in rev.size - 1 downTo 0) out.add(idOf[rev.data[k]])
    }

    companion object {
        private val WHITESPACE: BooleanArray = run {
            val ws = TokenizerTables.WHITESPACE
            var top = 0
            for (c in ws) top = maxOf(top, c)
            val out = BooleanArray(top + 1)
            for (c in ws) out[c] = true
            out
        }

        private fun isWhitespace(cp: Int): Boolean = cp < WHITESPACE.size && WHITESPACE[cp]
    }
}

/** Open-addressing hash of pieces as code-point sequences: lookups need no substring. */
private class PieceTable(val pool: IntArray, val starts: IntArray, capacity: Int) {
    private val bits = 32 - Integer.numberOfLeadingZeros(maxOf(16, capacity * 2) - 1)
    private val mask = (1 shl bits) - 1
    private val slots = IntArray(1 shl bits)  // piece id + 1, 0 = empty
    private val hashes = IntArray(capacity)
    private val extra = HashMap<Int, IntArray>()  // added specials' code points by id

    private fun slot(h: Int): Int = (h * -0x61c88647) ushr (32 - bits)

    private fun cpsOf(id: Int): IntArray? = extra[id]

    private fun hashOf(a: IntArray, from: Int, len: Int): Int {
        var h = 0
        for (k in from until from + len) h = 31 * h + a[k]
        return h
    }

    /** Adds piece `id` of the pool; false when an equal piece is already there. */
    fun add(id: Int): Boolean {
        val from = starts[id]
        val len = starts[id + 1] - from
        val h = hashOf(pool, from, len)
        if (find(pool, from, len, h) >= 0) return false
        insert(id, h)
        return true
    }

    fun addExtra(id: Int, cps: IntArray) {
        extra[id] = cps
        insert(id, hashOf(cps, 0, cps.size))
    }

    private fun insert(id: Int, h: Int) {
        hashes[id] = h
        var i = slot(h)
        while (slots[i] != 0) i = (i + 1) and mask
        slots[i] = id + 1
    }

    fun find(a: IntArray, from: Int, len: Int): Int = find(a, from, len, hashOf(a, from, len))

    /** The id of the piece equal to `a[from until from + len]` whose hash is `h`, or -1. */
    fun find(a: IntArray, from: Int, len: Int, h: Int): Int {
        var i = slot(h)
        while (true) {
            val v = slots[i]
            if (v == 0) return -1
            val id = v - 1
            if (hashes[id] == h && equal(id, a, from, len)) return id
            i = (i + 1) and mask
        }
    }

    private fun equal(id: Int, a: IntArray, from: Int, len: Int): Boolean {
        if (id < starts.size - 1) {
            val s = starts[id]
            if (starts[id + 1] - s != len) return false
            for (k in 0 until len) if (pool[s + k] != a[from + k]) return false
            return true
        }
        val cps = cpsOf(id) ?: return false
        if (cps.size != len) return false
        for (k in 0 until len) if (cps[k] != a[from + k]) return false
        return true
    }
}

/** SentencePiece's precompiled charsmap (a darts-clone trie plus replacement strings), applied
 *  one grapheme cluster at a time as the reference does (edge_m3.normalizer.CharsMap). */
private class CharsMap(blob: ByteArray, private val where: String) {
    private val units: IntArray
    private val normalized: ByteArray

    init {
        if (blob.size < 4) throw EdgeM3Exception("$where: not a SentencePiece model (charsmap too short)")
        val trieSize = le32(blob, 0).toLong() and 0xFFFFFFFFL
        if (trieSize == 0L || trieSize % 4 != 0L || 4 + trieSize > blob.size) {  // an empty trie: no units[0]
            throw EdgeM3Exception("$where: not a SentencePiece model (charsmap trie size is corrupt)")
        }
        units = IntArray((trieSize / 4).toInt()) { le32(blob, 4 + 4 * it) }
        normalized = blob.copyOfRange(4 + trieSize.toInt(), blob.size)
    }

    private fun offset(unit: Int): Int = (unit ushr 10) shl ((unit and (1 shl 9)) ushr 6)

    /** Value of the shortest trie key that is a prefix of `key[0 until len]`, or -1. */
    private fun firstPrefixValue(key: ByteArray, len: Int): Int {
        var pos = offset(units[0])
        for (k in 0 until len) {
            val c = key[k].toInt() and 0xFF
            if (c == 0) return -1
            pos = pos xor c
            if (pos >= units.size) return -1
            val unit = units[pos]
            if ((unit and 0x800000FF.toInt()) != c) return -1
            pos = pos xor offset(unit)
            if ((unit ushr 8) and 1 != 0) {  // a value past the trie's end: a corrupt model (issue 38)
                if (pos >= units.size) throw EdgeM3Exception("$where: corrupt charsmap (a value past the trie's end)")
                return units[pos] and 0x7FFFFFFF
            }
        }
        return -1
    }

    /** Appends the replacement of `key` when its shortest charsmap key matches; false otherwise. */
    private fun transform(key: ByteArray, len: Int, out: IntList): Boolean {
        val start = firstPrefixValue(key, len)
        if (start < 0 || start >= normalized.size) return false
        var end = start
        while (end < normalized.size && normalized[end].toInt() != 0) end++
        out.ensure(end - start)
        val count = Utf8.decode(normalized, start, end, out.data, out.size)
        if (count < 0) throw EdgeM3Exception("charsmap: replacement at byte $start is not valid UTF-8")
        out.size += count
        return true
    }

    /** Grapheme by grapheme: a cluster under WHOLE_GRAPHEME_BYTES bytes replaced whole by the value
     *  of its shortest matching key, else each character alone. */
    fun normalize(cps: IntArray, from: Int, to: Int, out: IntList) {
        val key = ByteArray(4 * TokenizerTables.WHOLE_GRAPHEME_BYTES)
        Graphemes.split(cps, from, to) { gs, ge ->
            var bytes = 0
            for (k in gs until ge) {
                bytes += Utf8.length(cps[k])
                if (bytes >= TokenizerTables.WHOLE_GRAPHEME_BYTES) break
            }
            var done = false
            if (bytes < TokenizerTables.WHOLE_GRAPHEME_BYTES) {
                var len = 0
                for (k in gs until ge) len += Utf8.encode(cps[k], key, len)
                done = transform(key, len, out)
            }
            if (!done) {
                for (k in gs until ge) {
                    val len = Utf8.encode(cps[k], key, 0)
                    if (!transform(key, len, out)) out.add(cps[k])
                }
            }
        }
    }

    companion object {
        fun le32(b: ByteArray, at: Int): Int =
            (b[at].toInt() and 0xFF) or ((b[at + 1].toInt() and 0xFF) shl 8) or
                ((b[at + 2].toInt() and 0xFF) shl 16) or ((b[at + 3].toInt() and 0xFF) shl 24)
    }
}

/** Extended grapheme clusters as the reference cuts them (edge_m3.graphemes: the Rust crate
 *  unicode-segmentation's UAX #29 rules, Unicode 16, with its state for GB9c, GB11 and GB12/13). */
internal object Graphemes {
    private val runStarts: IntArray
    private val runCats: ByteArray
    private val bmp = ByteArray(0x10000)

    init {
        val s = TokenizerTables.CATEGORY_RUNS
        val starts = IntList(4096)
        val cats = IntList(4096)
        var cp = 0
        var gap = 0
        for (ch in s) {
            if (ch in 'A'..'Z') {
                cp += gap
                gap = 0
                starts.add(cp)
                cats.add(ch - 'A')
            } else {
                gap = gap * 36 + (if (ch in '0'..'9') ch - '0' else ch - 'a' + 10)
            }
        }
        runStarts = starts.toArray()
        runCats = ByteArray(cats.size) { cats.data[it].toByte() }
        var r = 0
        for (c in 0 until 0x10000) {
            while (r + 1 < runStarts.size && runStarts[r + 1] <= c) r++
            bmp[c] = runCats[r]
        }
    }

    /** The category of one code point (TokenizerTables' numbering, LINKER_FLAG included). */
    fun category(cp: Int): Int {
        if (cp < 0x10000) return bmp[cp].toInt()
        var lo = 0
        var hi = runStarts.size - 1
        while (lo < hi) {
            val mid = (lo + hi + 1) ushr 1
            if (runStarts[mid] <= cp) lo = mid else hi = mid - 1
        }
        return runCats[lo].toInt()
    }

    /** No boundary between two categories, given the state of the text before (UAX #29). */
    private fun joins(before: Int, after: Int, incbLinked: Boolean, emojiZwj: Boolean, risOdd: Boolean): Boolean {
        val t = TokenizerTables
        if (before == t.CR && after == t.LF) return true  // GB3
        if (before == t.CONTROL || before == t.CR || before == t.LF ||
            after == t.CONTROL || after == t.CR || after == t.LF) return false  // GB4, GB5
        if (before == t.L && (after == t.L || after == t.V || after == t.LV || after == t.LVT)) return true  // GB6
        if ((before == t.LV || before == t.V) && (after == t.V || after == t.T)) return true  // GB7
        if ((before == t.LVT || before == t.T) && after == t.T) return true  // GB8
        if (after == t.EXTEND || after == t.ZWJ || after == t.SPACING_MARK || before == t.PREPEND) return true  // GB9-9b
        if (after == t.CONSONANT) return incbLinked  // GB9c
        if (before == t.ZWJ && after == t.PICTO) return emojiZwj  // GB11
        if (before == t.RI && after == t.RI) return risOdd  // GB12, GB13
        return false  // GB999
    }

    /** Calls `emit(start, end)` for each cluster of `cps[from until to]`, in order. */
    inline fun split(cps: IntArray, from: Int, to: Int, emit: (Int, Int) -> Unit) {
        var start = from
        var before = -1
        var state = 0
        for (i in from until to) {
            val raw = category(cps[i])
            val cat = raw and 15
            if (before >= 0 && !joinsWith(before, cat, state)) {
                emit(start, i)
                start = i
            }
            state = nextState(state, cps[i], raw)
            before = cat
        }
        if (to > from) emit(start, to)
    }

    // The crate's state as bits: conjunct run and linked (GB9c), pictographic run and armed ZWJ
    // (GB11), odd count of regional indicators (GB12/13).
    private const val INCB_RUN = 1
    private const val INCB_LINKED = 2
    private const val EXTPIC_RUN = 4
    private const val EMOJI_ZWJ = 8
    private const val RIS_ODD = 16

    fun joinsWith(before: Int, cat: Int, state: Int): Boolean =
        joins(before, cat, state and INCB_LINKED != 0, state and EMOJI_ZWJ != 0, state and RIS_ODD != 0)

    /** The state after code point `cp` of category `raw` (edge_m3.graphemes.graphemes' updates). */
    fun nextState(state: Int, cp: Int, raw: Int): Int {
        val t = TokenizerTables
        return when (raw and 15) {
            t.EXTEND -> {
                // emoji_zwj and ris_odd reset; a conjunct run carries on (and may get linked) unless ZWNJ.
                if (state and INCB_RUN != 0 && cp != t.ZWNJ) {
                    val linked = state and INCB_LINKED != 0 || raw and t.LINKER_FLAG != 0
                    (state and EXTPIC_RUN) or INCB_RUN or (if (linked) INCB_LINKED else 0)
                } else {
                    state and EXTPIC_RUN
                }
            }
            t.ZWJ -> {
                // InCB=Extend: a conjunct run carries on; ZWJ arms GB11 after a pictographic run.
                (state and (INCB_RUN or INCB_LINKED)) or (if (state and EXTPIC_RUN != 0) EMOJI_ZWJ else 0)
            }
            t.PICTO -> EXTPIC_RUN
            t.RI -> if (state and RIS_ODD != 0) 0 else RIS_ODD
            t.CONSONANT -> INCB_RUN
            else -> 0
        }
    }
}

/** A growable IntArray (no boxing). */
internal class IntList(capacity: Int) {
    var data = IntArray(maxOf(4, capacity))
    var size = 0

    fun ensure(extra: Int) {
        if (size + extra > data.size) data = data.copyOf(maxOf(data.size * 2, size + extra))
    }

    fun add(v: Int) {
        if (size == data.size) data = data.copyOf(data.size * 2)
        data[size++] = v
    }

    fun addRange(a: IntArray, from: Int, to: Int) {
        ensure(to - from)
        System.arraycopy(a, from, data, size, to - from)
        size += to - from
    }

    fun clear() {
        size = 0
    }

    fun toArray(): IntArray = data.copyOf(size)
}

/** `s` quoted with its control and line-separator characters escaped: a message stays one line. */
internal fun quoted(s: String): String = "\"" + s.map { c ->
    if (c < ' ' || c == '\u007f' || c == '\u0085' || c == '\u2028' || c == '\u2029') String.format("\\u%04x", c.code) else c.toString()
}.joinToString("") + "\""
