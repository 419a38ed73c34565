package dev.edgem3

import java.nio.ByteBuffer
import java.nio.charset.CharacterCodingException
import java.nio.charset.CodingErrorAction
import java.util.BitSet

// The ModernBERT family's tokenizer (manifest kind `byte-level-bpe`: GPT-2 / GPT-NeoX / OLMo style)
// in plain Kotlin (stdlib only). Its ids equal edge_m3.tokenizer.bpe.ByteLevelBPETokenizer's, which
// equal the reference's (`tokenizers` on the checkpoint's tokenizer.json), on every text; CI checks
// that on the corpora, random text and every code point (tests/test_kit_tokenizer.py). The steps, as
// the Python module's (docs/bundle-format.md):
//   1. added tokens with normalized=false found in the raw text, leftmost-longest, anywhere; an
//      lstrip one takes the whitespace before it (back to the previous match), an rstrip one the
//      whitespace after it; each is its id;
//   2. each text between them normalized (none, or NFC) and the normalized=true tokens found in it
//      the same way;
//   3. ByteLevel: a space in front unless the text starts with one (add_prefix_space), the GPT-2
//      pattern (use_regex), each piece's UTF-8 bytes as GPT-2's byte characters;
//   4. BPE per piece: the whole piece if it is a token (ignore_merges), else one symbol per byte
//      (unk for a byte outside the vocabulary, fused or dropped), merged by rank, lowest first,
//      leftmost on ties, as tokenizers' heap does;
//   5. `[CLS] ... [SEP]`, truncation keeping `[SEP]`.
// \p{L}, \p{N}, \s and NFC's compositions come from BpeTables.kt, NFC's decompositions and combining
// classes from WordPieceTables.kt: both generated from the same probe of the reference as Python's
// tables (tools/codegen/gen_bpe_tables.py, gen_wordpiece_tables.py), never from the JVM's Unicode
// data. Everything counts code points, as Python's str does. Immutable after construction.
// ios_assets/Sources/EdgeM3/Tokenizer/BpeTokenizer.swift is the same algorithm: change both together.

/**
 * `encode(text, maxLength)` -> `[CLS] pieces [SEP]` ids over the bundle's bpe.json (the vocabulary,
 * the merges and the added tokens), exactly as the Python pipeline gives them.
 */
class BpeTokenizer(bpeJson: ByteArray, override val spec: TokenizerSpec) : EdgeM3Tokenizer {
    /** Never trimmed: a byte-level BPE bundle's ids are its embedding table's rows. */
    override val vocab: VocabMap? get() = null

    private val options: BpeOptions
    private val ids: HashMap<String, Int>
    /** (left id, right id) -> rank of the merge; `merged[rank]`: the id it makes. */
    private val ranks: HashMap<Long, Int>
    private val merged: IntArray
    /** Byte -> id of its GPT-2 character, -1 when the vocabulary lacks it. */
    private val byteIds = IntArray(256)
    private val unkId: Int
    private val raw: AddedTokens
    private val normalized: AddedTokens
    private val bos = spec.special.bos
    private val eos = spec.special.eos

    init {
        val manifest = EdgeM3Contract.MANIFEST
        val file = spec.file
        if (spec.kind != EdgeM3Contract.BYTE_LEVEL_BPE) {
            throw EdgeM3Exception("$manifest: tokenizer kind '${spec.kind}' is not '${EdgeM3Contract.BYTE_LEVEL_BPE}'")
        }
        options = spec.bpeOptions
            ?: throw EdgeM3Exception("$manifest: tokenizer options missing (required for kind ${spec.kind})")
        if (options.normalizer !in EdgeM3Contract.BPE_NORMALIZERS) {
            throw EdgeM3Exception("$manifest: tokenizer options.normalizer '${options.normalizer}' unknown (known: " +
                EdgeM3Contract.BPE_NORMALIZERS.joinToString(", ") { "'$it'" } + ")")
        }
        if (spec.vocabMapFile != null || spec.idOffset != 0) {
            throw EdgeM3Exception("$manifest: tokenizer vocab_map must be null and id_offset 0 for a byte-level BPE tokenizer")
        }
        val data = readBpe(bpeJson, file)
        val tokens = data.vocab
        val n = tokens.size
        ids = HashMap(n * 2)
        for ((i, t) in tokens.withIndex()) ids[t] = i
        ranks = HashMap(data.merges.size * 2)
        merged = IntArray(data.merges.size)
        for ((rank, pair) in data.merges.withIndex()) {
            val (a, b) = pair
            val ia = ids[a]
            val ib = ids[b]
            val ab = ids[a + b]
            if (ia == null || ib == null || ab == null) {
                throw EdgeM3Exception("$file: merge [${quoted(a)}, ${quoted(b)}] is not of vocabulary tokens")
            }
            ranks[key(ia, ib)] = rank  // a repeated pair keeps its last rank, as the reference's map does
            merged[rank] = ab
        }
        val unk = options.unkToken
        unkId = if (unk.length == 0) -1 else ids[unk]
            ?: throw EdgeM3Exception("$file: options.unk_token ${quoted(unk)} is not in the vocabulary")
        val added = HashMap<Int, String>()
        val rawTokens = LinkedHashMap<String, Added>()
        val normalizedTokens = LinkedHashMap<String, Added>()
        for (entry in data.added) {
            val tid = entry.id
            if (added.containsKey(tid) || tid < 0 || tid >= spec.vocabSize || (tid < n && tokens[tid] != entry.content)) {
                throw EdgeM3Exception("$file: added token ${quoted(entry.content)} id $tid repeats, lies outside the " +
                    "vocab_size ${spec.vocabSize} or is another token's")
            }
            added[tid] = entry.content
            val cps = codePointsOf(entry.content)
            if (entry.normalized) {
                val norm = if (options.normalizer == "NFC") normalize(cps) else cps
                normalizedTokens[String(norm, 0, norm.size)] = Added(norm, tid, entry.lstrip, entry.rstrip)
            } else {
                rawTokens[entry.content] = Added(cps, tid, entry.lstrip, entry.rstrip)
            }
        }
        var covered = true
        for (id in n until spec.vocabSize) if (!added.containsKey(id)) { covered = false; break }
        if (!covered || (added.keys.maxOrNull() ?: (n - 1)) >= spec.vocabSize) {
            throw EdgeM3Exception("$file: $n vocabulary and ${added.size} added tokens do not make the manifest's " +
                "vocab_size ${spec.vocabSize} ids")
        }
        for ((k, pair) in spec.specialTokens.withIds(spec.special).withIndex()) {
            val (string, id) = pair
            val have = added[id] ?: if (id in 0 until n) tokens[id] else null
            if (have != string) {
                throw EdgeM3Exception("$file: special token ${EdgeM3Contract.SPECIAL_KEYS[k]} ${quoted(string)} is not id $id")
            }
        }
        for (b in 0 until 256) byteIds[b] = ids[BYTE_CHARS[b].toString()] ?: -1
        raw = AddedTokens(rawTokens.values.toList())
        normalized = AddedTokens(normalizedTokens.values.toList())
    }

    /** `[CLS] ... [SEP]`: EdgeM3Tokenizer.encode. */
    override fun encode(text: String, maxLength: Int?): IntArray {
        val cps = checkedCodePoints(text)
        if (maxLength != null && maxLength < 2) {
            throw EdgeM3Exception("max_length $maxLength: must be an integer of at least 2")
        }
        val out = IntList(cps.size + 2)
        out.add(bos)
        raw.split(cps, 0, cps.size, out) { a, b ->
            val norm = if (options.normalizer == "NFC") normalize(cps.copyOfRange(a, b)) else cps.copyOfRange(a, b)
            normalized.split(norm, 0, norm.size, out) { c, d -> pieces(norm, c, d, out) }
        }
        out.add(eos)
        val ids = out.toArray()
        return if (maxLength == null) ids else EdgeM3Core.truncate(ids, maxLength, eos)
    }

    /** ByteLevel's pieces of `cps[from until to]` (not empty), each as BPE ids. */
    private fun pieces(cps: IntArray, from: Int, to: Int, out: IntList) {
        var text = cps
        var a = from
        var b = to
        if (options.addPrefixSpace && cps[from] != SPACE) {
            text = IntArray(to - from + 1)
            text[0] = SPACE
            System.arraycopy(cps, from, text, 1, to - from)
            a = 0
            b = text.size
        }
        if (!options.useRegex) {
            word(text, a, b, out)
            return
        }
        var i = a
        while (i < b) {
            val e = matchEnd(text, i, b)
            word(text, i, e, out)
            i = e
        }
    }

    /** BPE of one piece: its bytes' characters merged by rank (tokenizers' Word.merge_all). */
    private fun word(cps: IntArray, from: Int, to: Int, out: IntList) {
        val bytes = utf8(cps, from, to)
        if (options.ignoreMerges) {
            val sb = StringBuilder(bytes.size)
            for (x in bytes) sb.append(BYTE_CHARS[x.toInt() and 0xFF])
            val whole = ids[sb.toString()]
            if (whole != null) {
                out.add(whole)
                return
            }
        }
        val c = IntArray(bytes.size)
        var n = 0
        var unkOpen = false  // the last symbol is an unk that the next may fuse with
        for (x in bytes) {
            val tid = byteIds[x.toInt() and 0xFF]
            if (tid >= 0) {
                c[n++] = tid
                unkOpen = false
            } else if (unkId >= 0 && !(unkOpen && options.fuseUnk)) {
                c[n++] = unkId
                unkOpen = true
            }
        }
        if (n < 2) {
            for (k in 0 until n) out.add(c[k])
            return
        }
        val nxt = IntArray(n) { it + 1 }
        val prv = IntArray(n) { it - 1 }
        val alive = BooleanArray(n) { true }
        val heap = LongHeap(n)
        for (k in 0 until n - 1) {
            val r = ranks[key(c[k], c[k + 1])]
            if (r != null) heap.push(entry(r, k))
        }
        while (heap.size > 0) {
            val top = heap.pop()
            val rank = (top ushr 32).toInt()
            val pos = top.toInt()
            val right = nxt[pos]
            if (!alive[pos] || right >= n) continue
            val r = ranks[key(c[pos], c[right])]
            val newId = merged[rank]
            if (r == null || merged[r] != newId) continue  // stale: the pair changed since
            c[pos] = newId
            alive[right] = false
            nxt[pos] = nxt[right]
            if (nxt[pos] < n) prv[nxt[pos]] = pos
            if (prv[pos] >= 0) ranks[key(c[prv[pos]], newId)]?.let { heap.push(entry(it, prv[pos])) }
            if (nxt[pos] < n) ranks[key(newId, c[nxt[pos]])]?.let { heap.push(entry(it, pos)) }
        }
        for (k in 0 until n) if (alive[k]) out.add(c[k])
    }

    /** A found added token: its code points (normalized ones' normalized), id and flags. */
    private class Added(val cps: IntArray, val id: Int, val lstrip: Boolean, val rstrip: Boolean)

    /** One of AddedVocabulary's two matchers: leftmost-longest over its tokens (edge_m3.tokenizer.bpe._AddedTokens). */
    private class AddedTokens(tokens: List<Added>) {
        private val sorted = tokens.sortedByDescending { it.cps.size }  // stable: at a position, the longest

        /** The ids of the matches in `cps[from until to]` into `out`, `between(a, b)` for each text between. */
        fun split(cps: IntArray, from: Int, to: Int, out: IntList, between: (Int, Int) -> Unit) {
            var pos = from  // the end of the text handed out so far
            var i = from  // where the search goes on: the last match's end (not its stripped end)
            while (i < to) {
                val m = matchAt(cps, i, to)
                if (m == null) {
                    i++
                    continue
                }
                var start = i
                var stop = i + m.cps.size
                if (m.lstrip) while (start > pos && Data.space[cps[start - 1]]) start--
                if (m.rstrip) while (stop < to && Data.space[cps[stop]]) stop++
                if (pos < start) between(pos, start)
                out.add(m.id)
                i += m.cps.size
                pos = stop
            }
            if (pos < to) between(pos, to)
        }

        private fun matchAt(cps: IntArray, i: Int, to: Int): Added? {
            for (t in sorted) {
                val s = t.cps
                if (s.size > to - i) continue
                var same = true
                for (j in s.indices) if (cps[i + j] != s[j]) { same = false; break }
                if (same) return t
            }
            return null
        }
    }

    /** A binary min-heap of (rank << 32 | position): lowest rank first, then leftmost (Python's heapq order). */
    private class LongHeap(capacity: Int) {
        private var a = LongArray(maxOf(4, capacity))
        var size = 0

        fun push(v: Long) {
            if (size == a.size) a = a.copyOf(a.size * 2)
            var i = size++
            while (i > 0) {
                val p = (i - 1) / 2
                if (a[p] <= v) break
                a[i] = a[p]
                i = p
            }
            a[i] = v
        }

        fun pop(): Long {
            val top = a[0]
            val last = a[--size]
            var i = 0
            while (true) {
                var child = 2 * i + 1
                if (child >= size) break
                if (child + 1 < size && a[child + 1] < a[child]) child++
                if (a[child] >= last) break
                a[i] = a[child]
                i = child
            }
            if (size > 0) a[i] = last
            return top
        }
    }

    /** bpe.json as read (edge_m3.tokenizer.bpe.read_bpe). */
    private class BpeData(val vocab: List<String>, val merges: List<Pair<String, String>>, val added: List<AddedEntry>)

    private class AddedEntry(val id: Int, val content: String, val normalized: Boolean, val lstrip: Boolean,
                             val rstrip: Boolean)

    companion object {
        private const val SPACE = 0x20
        private val ADDED_FLAGS = listOf("special", "normalized", "lstrip", "rstrip")

        /** GPT-2's byte -> character map: printable Latin-1 bytes stay, the other 68 move to U+0100.. in byte order. */
        private val BYTE_CHARS: CharArray = CharArray(256).also { out ->
            var next = 0
            for (b in 0 until 256) {
                val keep = b in 0x21..0x7E || b in 0xA1..0xAC || b in 0xAE..0xFF
                out[b] = if (keep) b.toChar() else (256 + next++).toChar()
            }
        }

        private fun key(left: Int, right: Int): Long = (left.toLong() shl 32) or (right.toLong() and 0xFFFFFFFFL)

        private fun entry(rank: Int, pos: Int): Long = (rank.toLong() shl 32) or pos.toLong()

        /** A string in a one-line message, as Python's repr shows most: in single quotes. */
        private fun quoted(s: String): String = "'" + s.replace("\\", "\\\\").replace("\n", "\\n") + "'"

        /** Where the GPT-2 pattern's match at `i` ends (`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
         *  ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, the alternatives in that order; every position matches). */
        internal fun matchEnd(t: IntArray, i: Int, n: Int): Int {
            val c = t[i]
            if (c == 0x27 && i + 1 < n) {
                val a = t[i + 1]
                if (a == 's'.code || a == 't'.code || a == 'm'.code || a == 'd'.code) return i + 2
                if (i + 2 < n) {
                    val b = t[i + 2]
                    if ((a == 'r'.code || a == 'v'.code) && b == 'e'.code) return i + 3
                    if (a == 'l'.code && b == 'l'.code) return i + 3
                }
            }
            val d = Data
            if (c == SPACE && i + 1 < n) {  // ` ?X+` with the space, when X follows it
                val h = t[i + 1]
                if (d.letter[h]) return run(t, i + 2, n) { d.letter[it] }
                if (d.number[h]) return run(t, i + 2, n) { d.number[it] }
                if (!d.space[h]) return run(t, i + 2, n) { !d.space[it] && !d.letter[it] && !d.number[it] }
            } else if (!d.space[c]) {  // ` ?X+` without it
                if (d.letter[c]) return run(t, i + 1, n) { d.letter[it] }
                if (d.number[c]) return run(t, i + 1, n) { d.number[it] }
                return run(t, i + 1, n) { !d.space[it] && !d.letter[it] && !d.number[it] }
            }
            val e = run(t, i + 1, n) { d.space[it] }
            return if (e == n || e - i == 1) e else e - 1  // \s+(?!\S) backs off one; else \s+
        }

        private inline fun run(t: IntArray, from: Int, n: Int, ok: (Int) -> Boolean): Int {
            var j = from
            while (j < n && ok(t[j])) j++
            return j
        }

        /** UTF-8 of code points (valid scalars: surrogates were refused). */
        private fun utf8(cps: IntArray, from: Int, to: Int): ByteArray {
            var size = 0
            for (k in from until to) {
                val c = cps[k]
                size += if (c < 0x80) 1 else if (c < 0x800) 2 else if (c < 0x10000) 3 else 4
            }
            val out = ByteArray(size)
            var j = 0
            for (k in from until to) {
                val c = cps[k]
                when {
                    c < 0x80 -> out[j++] = c.toByte()
                    c < 0x800 -> {
                        out[j++] = (0xC0 or (c shr 6)).toByte()
                        out[j++] = (0x80 or (c and 0x3F)).toByte()
                    }
                    c < 0x10000 -> {
                        out[j++] = (0xE0 or (c shr 12)).toByte()
                        out[j++] = (0x80 or ((c shr 6) and 0x3F)).toByte()
                        out[j++] = (0x80 or (c and 0x3F)).toByte()
                    }
                    else -> {
                        out[j++] = (0xF0 or (c shr 18)).toByte()
                        out[j++] = (0x80 or ((c shr 12) and 0x3F)).toByte()
                        out[j++] = (0x80 or ((c shr 6) and 0x3F)).toByte()
                        out[j++] = (0x80 or (c and 0x3F)).toByte()
                    }
                }
            }
            return out
        }

        /** The reference's NFC (edge_m3.tokenizer.bpe.nfc): full canonical decomposition, canonical
         *  order, then canonical composition (the reference's pairs; Hangul by the algorithm). */
        internal fun normalize(text: IntArray): IntArray {
            var ascii = true
            for (c in text) if (c >= 0x80) { ascii = false; break }
            if (ascii) return text
            val wp = WordPieceTokenizer.Data
            val nfd = IntList(text.size + 8)
            for (c in text) {
                val m = wp.decompose[c]
                if (m == null) nfd.add(c) else for (x in m) nfd.add(x)
            }
            val a = nfd.data
            var i = 0
            while (i < nfd.size) {
                if (wp.combining[a[i]] == null) {
                    i++
                    continue
                }
                var j = i + 1
                while (j < nfd.size && wp.combining[a[j]] != null) j++
                if (j - i > 1) {
                    val run = (i until j).map { a[it] }.sortedBy { wp.combining.getValue(it) }  // stable
                    for (k in run.indices) a[i + k] = run[k]
                }
                i = j
            }
            val out = IntList(nfd.size)
            var starter = -1  // index in out of the last starter
            for (k in 0 until nfd.size) {
                val ch = a[k]
                val cc = wp.combining[ch] ?: 0
                if (starter >= 0) {
                    val last = if (out.size - 1 > starter) wp.combining[out.data[out.size - 1]] ?: 0 else -1
                    if (last == -1 || (last in 1 until cc)) {  // not blocked: nothing between, or a lower class
                        val joined = Data.compose[key(out.data[starter], ch)] ?: hangulPair(out.data[starter], ch)
                        if (joined >= 0) {
                            out.data[starter] = joined
                            continue
                        }
                    }
                }
                if (cc == 0) starter = out.size
                out.add(ch)
            }
            return out.toArray()
        }

        /** The syllable L+V or LV+T compose to, or -1. */
        private fun hangulPair(a: Int, b: Int): Int {
            val t = WordPieceTables
            if (a >= t.LBASE && a < t.LBASE + t.LCOUNT && b >= t.VBASE && b < t.VBASE + t.VCOUNT) {
                return t.SBASE + ((a - t.LBASE) * t.VCOUNT + b - t.VBASE) * t.TCOUNT
            }
            val s = a - t.SBASE
            if (s >= 0 && s < t.LCOUNT * t.VCOUNT * t.TCOUNT && s % t.TCOUNT == 0 && b > t.TBASE && b < t.TBASE + t.TCOUNT) {
                return a + b - t.TBASE
            }
            return -1
        }

        /** bpe.json: {"vocab": [token by id], "merges": [[left, right] by rank], "added_tokens": [{"id",
         *  "content", "special", "normalized", "lstrip", "rstrip"}]}, checked as read_bpe does. */
        private fun readBpe(bytes: ByteArray, file: String): BpeData {
            val decoder = Charsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
            val text = try {
                decoder.decode(ByteBuffer.wrap(bytes)).toString()
            } catch (exc: CharacterCodingException) {
                throw EdgeM3Exception("$file: not valid JSON (not UTF-8)")
            }
            val tree = try {
                MiniJson.parse(text)
            } catch (exc: EdgeM3Exception) {
                throw EdgeM3Exception("$file: not valid JSON (${exc.message})")
            } catch (exc: StackOverflowError) {
                throw EdgeM3Exception("$file: not valid JSON (nested too deeply)")
            }
            val d = tree as? Map<*, *>
            fun list(key: String): List<Any?> = d?.get(key) as? List<Any?>
                ?: throw EdgeM3Exception("$file: $key is missing or not a list, not supported here")
            val vocab = list("vocab")
            if (!vocab.all { it is String && it.isNotEmpty() } || vocab.toSet().size != vocab.size) {
                throw EdgeM3Exception("$file: vocab must be distinct non-empty strings")
            }
            val merges = list("merges").map { m ->
                val pair = m as? List<*>
                val a = pair?.getOrNull(0) as? String
                val b = pair?.getOrNull(1) as? String
                if (pair == null || pair.size != 2 || a == null || b == null) {
                    throw EdgeM3Exception("$file: merges must be [left, right] pairs of strings")
                }
                Pair(a, b)
            }
            val added = list("added_tokens").map { x ->
                val e = x as? Map<*, *>
                val content = e?.get("content") as? String
                val id = e?.get("id") as? Long
                val flags = ADDED_FLAGS.map { e?.get(it) as? Boolean }
                if (content == null || content.length == 0 || id == null || id < Int.MIN_VALUE || id > Int.MAX_VALUE ||
                    flags.any { it == null }) {
                    throw EdgeM3Exception("$file: added_tokens entry ${x.toString().take(80)} needs id, content and the " +
                        "flags ${ADDED_FLAGS.joinToString(", ")}")
                }
                AddedEntry(id.toInt(), content, flags[1]!!, flags[2]!!, flags[3]!!)
            }
            @Suppress("UNCHECKED_CAST")
            return BpeData(vocab as List<String>, merges, added)
        }
    }

    /** BpeTables decoded once: the GPT-2 pattern's classes and NFC's compositions. */
    private object Data {
        val letter = ranges(BpeTables.LETTER)
        val number = ranges(BpeTables.NUMBER)
        val space = ranges(BpeTables.SPACE)
        /** (first, second) as `key` -> the composite. */
        val compose: Map<Long, Int> = HashMap<Long, Int>().also { out ->
            for (item in items(BpeTables.COMPOSITIONS)) {
                val (composite, pair) = item.split(":")
                val (a, b) = pair.split(" ").map { it.toInt(16) }
                out[key(a, b)] = composite.toInt(16)
            }
        }

        private fun items(table: String): List<String> = table.split(",").map { it.trim() }.filter { it.isNotEmpty() }

        /** "a-b,c" (hex) -> the set of code points. */
        private fun ranges(table: String): BitSet {
            val out = BitSet(0x110000)
            for (item in items(table)) {
                val parts = item.split("-")
                out.set(parts[0].toInt(16), parts[parts.size - 1].toInt(16) + 1)
            }
            return out
        }
    }
}
