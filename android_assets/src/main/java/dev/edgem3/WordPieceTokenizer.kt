package dev.edgem3

import java.nio.ByteBuffer
import java.nio.charset.CharacterCodingException
import java.nio.charset.CodingErrorAction
import java.util.BitSet

// The BERT family's tokenizer (manifest kind `wordpiece`) in plain Kotlin (stdlib only). Its ids
// equal edge_m3.tokenizer.wordpiece.WordPieceTokenizer's, which equal the reference's (`tokenizers`
// on the checkpoint's tokenizer.json), on every text; CI checks that on the corpora, random text
// and every code point (tests/test_kit_tokenizer.py). The steps, as the Python module's:
//   1. special-token strings in the raw text -> their ids, leftmost-longest (SpecialSplit);
//   2. BertNormalizer per the manifest's options: clean_text, handle_chinese_chars, strip_accents
//      (NFD, canonical order, nonspacing marks dropped), lowercase;
//   3. BertPreTokenizer: words between whitespace, each punctuation character a word;
//   4. WordPiece per word: greedy longest match first, later pieces with the continuing prefix; a
//      word too long or not covered is one unk;
// every per-code-point decision from WordPieceTables.kt, generated from the same probe of the
// reference as Python's tables (tools/codegen/gen_wordpiece_tables.py), never from the JVM's
// Unicode data. Everything counts code points, as Python's str does. Immutable after construction.
// ios_assets/Sources/EdgeM3/Tokenizer/WordPieceTokenizer.swift is the same algorithm: change both together.

/**
 * `encode(text, maxLength)` -> `[CLS] pieces [SEP]` ids over the bundle's vocab.txt (one token a
 * line, id = line number), exactly as the Python pipeline gives them.
 */
class WordPieceTokenizer(vocabBytes: ByteArray, override val spec: TokenizerSpec) : EdgeM3Tokenizer {
    /** Never trimmed: a WordPiece bundle's ids are its embedding table's rows. */
    override val vocab: VocabMap? get() = null

    init {
        if (spec.kind != EdgeM3Contract.WORDPIECE) {
            throw EdgeM3Exception("${EdgeM3Contract.MANIFEST}: tokenizer kind '${spec.kind}' is not '${EdgeM3Contract.WORDPIECE}'")
        }
    }

    private val options: WordPieceOptions = spec.options
        ?: throw EdgeM3Exception("${EdgeM3Contract.MANIFEST}: tokenizer options missing (required for kind ${spec.kind})")
    private val ids: HashMap<String, Int>
    private val unk = spec.special.unk
    private val prefix = options.continuingSubwordPrefix
    private val longest: Int
    private val longestContinuation: Int
    private val split: SpecialSplit

    init {
        val file = spec.file
        if (spec.vocabMapFile != null) {
            throw EdgeM3Exception("${EdgeM3Contract.MANIFEST}: tokenizer vocab_map must be null for a WordPiece vocabulary")
        }
        val tokens = readVocab(vocabBytes, file)
        ids = HashMap(tokens.size * 2)
        for ((i, tok) in tokens.withIndex()) {
            val seen = ids.put(tok, i)
            if (seen != null) throw EdgeM3Exception("$file: vocabulary line ${i + 1} ${shown(tok)} repeats line ${seen + 1}")
        }
        if (tokens.size != spec.vocabSize || spec.idOffset != 0) {
            throw EdgeM3Exception("$file: ${tokens.size} tokens, but the manifest says vocab_size ${spec.vocabSize} " +
                "and id_offset ${spec.idOffset} (want 0)")
        }
        val pairs = spec.specialTokens.withIds(spec.special)
        for ((k, pair) in pairs.withIndex()) {
            if (ids[pair.first] != pair.second) {
                throw EdgeM3Exception("$file: special token ${EdgeM3Contract.SPECIAL_KEYS[k]} '${pair.first}' is not " +
                    "line ${pair.second + 1}")
            }
        }
        var top = 0
        var topContinuation = 0
        for (tok in tokens) {
            val n = tok.codePointCount(0, tok.length)
            top = maxOf(top, n)
            if (tok.startsWith(prefix)) topContinuation = maxOf(topContinuation, n - prefix.codePointCount(0, prefix.length))
        }
        longest = top
        longestContinuation = topContinuation
        split = SpecialSplit(pairs, spec.special.bos, spec.special.eos)
    }

    /** `[CLS] ... [SEP]`: EdgeM3Tokenizer.encode. */
    override fun encode(text: String, maxLength: Int?): IntArray = split.encode(text, maxLength, this::pieces)

    /** The words of `cps[from until to]` as WordPiece sees them (normalized, pre-tokenized), as ids. */
    private fun pieces(cps: IntArray, from: Int, to: Int, out: IntList) {
        val norm = normalize(cps, from, to)
        val buf = norm.data
        val n = norm.size
        var i = 0
        while (i < n) {
            val c = buf[i]
            when {
                Data.punct[c] -> {
                    word(buf, i, i + 1, out)
                    i++
                }
                Data.split[c] -> i++
                else -> {
                    var j = i + 1
                    while (j < n && !Data.punct[buf[j]] && !Data.split[buf[j]]) j++
                    word(buf, i, j, out)
                    i = j
                }
            }
        }
    }

    /** Greedy longest-match-first over `w[s until e]`; one unk for a long or uncoverable word. */
    private fun word(w: IntArray, s: Int, e: Int, out: IntList) {
        if (e - s > options.maxInputCharsPerWord) {
            out.add(unk)
            return
        }
        val mark = out.size
        var start = s
        while (start < e) {
            var end = minOf(e, start + if (start > s) longestContinuation else longest)
            var found = -1
            while (end > start) {
                val piece = String(w, start, end - start)
                found = ids[if (start > s) prefix + piece else piece] ?: -1
                if (found >= 0) break
                end--
            }
            if (found < 0) {
                out.size = mark
                out.add(unk)
                return
            }
            out.add(found)
            start = end
        }
    }

    /** BertNormalizer with the manifest's options (edge_m3.tokenizer.wordpiece.normalize). */
    private fun normalize(cps: IntArray, from: Int, to: Int): IntList {
        var out = IntList(to - from + 8)
        for (i in from until to) {
            var c = cps[i]
            if (options.cleanText) {
                if (Data.cleanDrop[c]) continue
                if (Data.cleanSpace[c]) c = SPACE
            }
            if (options.handleChineseChars && Data.chinese[c]) {
                out.add(SPACE)
                out.add(c)
                out.add(SPACE)
            } else {
                out.add(c)
            }
        }
        if (options.stripAccents) out = stripAccents(out)
        if (options.lowercase) {
            val lower = IntList(out.size + 8)
            for (k in 0 until out.size) {
                val c = out.data[k]
                val m = Data.lower[c]
                if (m == null) lower.add(c) else for (x in m) lower.add(x)
            }
            out = lower
        }
        return out
    }

    /** NFD, then each run of non-starters sorted by combining class (stably), then nonspacing marks dropped. */
    private fun stripAccents(text: IntList): IntList {
        val nfd = IntList(text.size + 8)
        for (k in 0 until text.size) {
            val c = text.data[k]
            if (c >= WordPieceTables.SBASE && c < WordPieceTables.SBASE + HANGUL_COUNT) {
                val si = c - WordPieceTables.SBASE
                val t = si % WordPieceTables.TCOUNT
                nfd.add(WordPieceTables.LBASE + si / (WordPieceTables.VCOUNT * WordPieceTables.TCOUNT))
                nfd.add(WordPieceTables.VBASE + si % (WordPieceTables.VCOUNT * WordPieceTables.TCOUNT) / WordPieceTables.TCOUNT)
                if (t != 0) nfd.add(WordPieceTables.TBASE + t)
            } else {
                val d = Data.decompose[c]
                if (d == null) nfd.add(c) else for (x in d) nfd.add(x)
            }
        }
        val a = nfd.data
        var i = 0
        while (i < nfd.size) {
            if (Data.combining[a[i]] == null) {
                i++
                continue
            }
            var j = i + 1
            while (j < nfd.size && Data.combining[a[j]] != null) j++
            if (j - i > 1) {
                val run = (i until j).map { a[it] }.sortedBy { Data.combining.getValue(it) }  // stable
                for (k in run.indices) a[i + k] = run[k]
            }
            i = j
        }
        val out = IntList(nfd.size)
        for (k in 0 until nfd.size) if (!Data.nonspacing[a[k]]) out.add(a[k])
        return out
    }

    companion object {
        private const val SPACE = 0x20
        private const val HANGUL_COUNT = WordPieceTables.LCOUNT * WordPieceTables.VCOUNT * WordPieceTables.TCOUNT
        private val LINE_BREAKS = intArrayOf(0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)

        /** vocab.txt's tokens: strict UTF-8, one a line (id = line number), none empty or holding a
         *  line break (as Python's str.splitlines sees one), the last line's "\n" optional. */
        fun readVocab(bytes: ByteArray, file: String): List<String> {
            val decoder = Charsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
            val text = try {
                decoder.decode(ByteBuffer.wrap(bytes)).toString()
            } catch (exc: CharacterCodingException) {
                throw EdgeM3Exception("$file: not UTF-8")
            }
            val lines = text.split("\n").toMutableList()
            if (lines.last().length == 0) lines.removeAt(lines.size - 1)
            for ((i, tok) in lines.withIndex()) {
                if (tok.length == 0 || tok.any { it.code in LINE_BREAKS }) {
                    throw EdgeM3Exception("$file: vocabulary line ${i + 1} ${shown(tok)} is empty or holds a line break")
                }
            }
            if (lines.isEmpty()) throw EdgeM3Exception("$file: empty vocabulary")
            return lines
        }

        /** A token in a one-line message: quoted, control characters and line breaks escaped. */
        private fun shown(tok: String): String = tok.map {
            val c = it.code
            when {
                it == '\t' -> "\\t"
                it == '\n' -> "\\n"
                it == '\r' -> "\\r"
                c < 0x20 || c in 0x7F..0x9F -> "\\x%02x".format(c)
                c == 0x2028 || c == 0x2029 -> "\\u%04x".format(c)
                else -> it.toString()
            }
        }.joinToString("", "'", "'")
    }

    /** WordPieceTables decoded once: sets of code points, and maps (edge_m3.tokenizer.wordpiece._tables);
     *  BpeTokenizer's NFC takes its decompositions and combining classes. */
    internal object Data {
        val cleanDrop = ranges(WordPieceTables.CLEAN_DROP)
        val cleanSpace = ranges(WordPieceTables.CLEAN_SPACE)
        val split = ranges(WordPieceTables.SPLIT)
        val punct = ranges(WordPieceTables.PUNCT)
        val chinese = ranges(WordPieceTables.CHINESE)
        val nonspacing = ranges(WordPieceTables.NONSPACING)
        val decompose = map(WordPieceTables.DECOMPOSITIONS)
        val lower = map(WordPieceTables.LOWERCASE)
        val combining: Map<Int, Int> = HashMap<Int, Int>().also { out ->
            for (item in items(WordPieceTables.COMBINING)) {
                val (range, value) = item.split(":")
                val (lo, hi) = span(range)
                for (cp in lo..hi) out[cp] = value.toInt()
            }
        }

        private fun items(table: String): List<String> = table.split(",").map { it.trim() }.filter { it.isNotEmpty() }

        private fun span(item: String): Pair<Int, Int> {
            val parts = item.split("-")
            return parts[0].toInt(16) to parts[parts.size - 1].toInt(16)
        }

        /** "a-b,c" (hex) -> the set of code points. */
        private fun ranges(table: String): BitSet {
            val out = BitSet(0x110000)
            for (item in items(table)) {
                val (lo, hi) = span(item)
                out.set(lo, hi + 1)
            }
            return out
        }

        /** "cp:hex hex,..." -> code point -> code points. */
        private fun map(table: String): Map<Int, IntArray> {
            val out = HashMap<Int, IntArray>()
            for (item in items(table)) {
                val (key, value) = item.split(":")
                out[key.toInt(16)] = value.split(" ").map { it.toInt(16) }.toIntArray()
            }
            return out
        }
    }
}
