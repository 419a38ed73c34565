package dev.edgem3

// The fields of sentencepiece.bpe.model that tokenization needs, read straight from the protobuf
// wire format (no protobuf library): ModelProto.pieces (piece, score, type),
// trainer_spec.model_type and normalizer_spec.precompiled_charsmap. Everything else in the file is
// skipped. What it refuses is what edge_m3/tokenizer/spmodel.py refuses (issue 38's differential):
// field number 0 or a wire type 3, 4, 6, 7 in any message it reads (the model, a piece, trainer_spec,
// normalizer_spec), a known field of the wrong wire type, a field past its message, no pieces, a
// model type other than unigram.
// Written for Kotlin 1.3+ (what CI compiles with): no newer stdlib calls.

/** Pieces as code points (one pool), their float32 scores and types, and the charsmap bytes. */
class SentencePieceModel internal constructor(
    /** Code points of piece `i`: `codePoints[starts[i] until starts[i + 1]]`. */
    internal val codePoints: IntArray,
    internal val starts: IntArray,
    val scores: FloatArray,
    val types: IntArray,
    val charsmap: ByteArray
) {
    val size: Int get() = scores.size

    /** Piece `i` as a String (for messages and tests). */
    fun piece(i: Int): String = String(codePoints, starts[i], starts[i + 1] - starts[i])

    companion object {
        // sentencepiece_model.proto: SentencePiece.Type
        const val NORMAL = 1
        const val UNKNOWN = 2
        const val CONTROL = 3
        const val USER_DEFINED = 4

        // sentencepiece_model.proto: TrainerSpec.ModelType
        private const val UNIGRAM = 1L
        private val MODEL_TYPES = mapOf(1L to "unigram", 2L to "bpe", 3L to "word", 4L to "char")

        /** Parses the model file; any malformed byte is an EdgeM3Exception naming `where`. */
        fun parse(bytes: ByteArray, where: String): SentencePieceModel {
            try {
                return Parser(bytes).model()
            } catch (exc: ProtoException) {
                throw EdgeM3Exception("$where: not a SentencePiece model (${exc.message})")
            }
        }
    }

    private class ProtoException(message: String) : RuntimeException(message)

    private class Parser(val b: ByteArray) {
        var pool = IntArray(maxOf(1024, b.size / 3))  // code points take about a quarter of the file
        var poolEnd = 0
        var starts = IntArray(1024)
        var scores = FloatArray(1024)
        var types = IntArray(1024)
        var n = 0
        var charsmap = ByteArray(0)
        var modelType = UNIGRAM
        var modelTypeWide = false  // a varint past 64 bits: not unigram (Python reads it whole)

        fun model(): SentencePieceModel {
            fields(0, b.size, "model") { field, wire, pos ->
                when (field) {
                    1 -> {  // pieces
                        expect(field, wire, 2, "pieces")
                        val end = lengthEnd(pos)
                        piece(next, end)
                        end
                    }
                    2 -> {  // trainer_spec
                        expect(field, wire, 2, "trainer_spec")
                        val end = lengthEnd(pos)
                        trainer(next, end)
                        end
                    }
                    3 -> {  // normalizer_spec
                        expect(field, wire, 2, "normalizer_spec")
                        val end = lengthEnd(pos)
                        normalizer(next, end)
                        end
                    }
                    else -> -1
                }
            }
            if (n == 0) throw ProtoException("no pieces")
            if (modelType != UNIGRAM || modelTypeWide) {
                val name = if (modelTypeWide) "past 2^64" else MODEL_TYPES[modelType] ?: java.lang.Long.toUnsignedString(modelType)
                throw ProtoException("model type $name, expected unigram (XLM-R's)")
            }
            if (n + 1 > starts.size) starts = starts.copyOf(n + 1)
            starts[n] = poolEnd
            return SentencePieceModel(pool.copyOf(poolEnd), starts.copyOf(n + 1), scores.copyOf(n), types.copyOf(n),
                charsmap)
        }

        // ---- wire format: `next` is the position after the last varint read
        var next = 0
        /** Whether the last varint read held bits past 64 (Python's reader keeps them). */
        var wide = false

        /** A known field of the wrong wire type (Python's spmodel._expect). */
        fun expect(field: Int, wire: Int, want: Int, what: String) {
            if (wire != want) throw ProtoException("$what (field $field) has wire type $wire, expected $want")
        }

        /** Calls `field(number, wireType, pos)` for each field of the message in `b[start until end]`: it
         *  returns the position after the field, or -1 to skip it. */
        inline fun fields(start: Int, end: Int, what: String, field: (Int, Int, Int) -> Int) {
            var pos = start
            while (pos < end) {
                val key = varint(pos)
                // Field number 0 is not protobuf (issue 38: Python refused it, the kits skipped it).
                if (key ushr 3 == 0L && !wide) throw ProtoException("field number 0 at byte $pos")
                val wire = (key and 7L).toInt()
                // A number past Int (or past 64 bits) is no known field: never truncated into one.
                val number = if (wide || key ushr 3 > Int.MAX_VALUE.toLong()) -1 else (key ushr 3).toInt()
                val after = field(number, wire, next)
                pos = if (after >= 0) after else skip(next, wire, end)
                if (pos > end) throw ProtoException("$what field past its message at byte $pos")
            }
        }

        fun varint(start: Int): Long {
            var pos = start
            var shift = 0
            var out = 0L
            wide = false
            while (true) {
                if (pos >= b.size || shift > 63) throw ProtoException("truncated varint at byte $start")
                val c = b[pos++].toInt() and 0xFF
                out = out or ((c and 0x7F).toLong() shl shift)
                if (shift == 63 && c and 0x7E != 0) wide = true
                if (c < 0x80) break
                shift += 7
            }
            next = pos
            return out
        }

        /** A length-delimited field's end; its content starts at `next`. */
        fun lengthEnd(start: Int): Int {
            val len = varint(start)
            if (len < 0 || len > b.size - next) throw ProtoException("length $len past the end at byte $start")
            return next + len.toInt()
        }

        fun skip(start: Int, wire: Int, limit: Int): Int {
            val end = when (wire) {
                0 -> { varint(start); next }
                1 -> start + 8
                2 -> lengthEnd(start)
                5 -> start + 4
                else -> throw ProtoException("wire type $wire at byte $start")
            }
            if (end > limit) throw ProtoException("field past the end at byte $start")
            return end
        }

        fun fixed32(pos: Int): Int =
            (b[pos].toInt() and 0xFF) or ((b[pos + 1].toInt() and 0xFF) shl 8) or
                ((b[pos + 2].toInt() and 0xFF) shl 16) or ((b[pos + 3].toInt() and 0xFF) shl 24)

        /** One SentencePiece message: piece = 1 (string), score = 2 (float), type = 3 (enum, NORMAL default). */
        fun piece(start: Int, end: Int) {
            if (n == scores.size) {
                scores = scores.copyOf(n * 2)
                types = types.copyOf(n * 2)
                starts = starts.copyOf(n * 2 + 1)
            }
            val pieceStart = poolEnd
            var score = 0f
            var type = NORMAL
            fields(start, end, "piece") { field, wire, pos ->
                when (field) {
                    1 -> {
                        expect(field, wire, 2, "piece")
                        val stop = lengthEnd(pos)
                        poolEnd = pieceStart  // proto2: the last value wins
                        if (stop <= end) utf8(next, stop)
                        stop
                    }
                    2 -> {
                        expect(field, wire, 5, "score")
                        if (pos + 4 <= end) score = java.lang.Float.intBitsToFloat(fixed32(pos))
                        pos + 4
                    }
                    3 -> {
                        expect(field, wire, 0, "type")
                        val v = varint(pos)
                        // An enum is an int32: a larger varint (-1 is 2^64 - 1) is refused, as by Python.
                        if (wide || v < 0 || v > Int.MAX_VALUE.toLong()) {
                            throw ProtoException("a piece type ${java.lang.Long.toUnsignedString(v)}${if (wide) "+" else ""} is past int32")
                        }
                        type = v.toInt()
                        next
                    }
                    else -> -1
                }
            }
            // An empty or missing piece string (issue 38: Python refused it, the kits took it).
            if (poolEnd == pieceStart) throw ProtoException("a piece has no string at byte $start")
            starts[n] = pieceStart
            scores[n] = score
            types[n] = type
            n++
        }

        /** TrainerSpec: model_type = 3 (enum, UNIGRAM default); the rest is not used by the reference. */
        fun trainer(start: Int, end: Int) {
            fields(start, end, "trainer_spec") { field, wire, pos ->
                if (field == 3) {
                    expect(field, wire, 0, "trainer_spec.model_type")
                    modelType = varint(pos)
                    modelTypeWide = wide
                    next
                } else {
                    -1
                }
            }
        }

        /** NormalizerSpec: precompiled_charsmap = 2 (bytes); the rest is not used by the reference. */
        fun normalizer(start: Int, end: Int) {
            fields(start, end, "normalizer") { field, wire, pos ->
                if (field == 2) {
                    expect(field, wire, 2, "normalizer_spec.precompiled_charsmap")
                    val stop = lengthEnd(pos)
                    if (stop <= end) charsmap = b.copyOfRange(next, stop)
                    stop
                } else {
                    -1
                }
            }
        }

        /** Strict UTF-8 (no overlong forms, surrogates or values past U+10FFFF) into the pool. */
        fun utf8(start: Int, end: Int) {
            if (poolEnd + (end - start) > pool.size) pool = pool.copyOf(maxOf(pool.size * 2, poolEnd + end - start))
            val count = Utf8.decode(b, start, end, pool, poolEnd)
            if (count < 0) throw ProtoException("piece is not valid UTF-8 at byte ${start - count - 1}")
            poolEnd += count
        }
    }
}

/** UTF-8 <-> code points, strict, for the model file, the charsmap and graphemes. */
internal object Utf8 {
    /** Decodes `b[start until end]` into `out` from `at`: the number of code points, or
     *  `-(1 + offset of the bad byte)`. `out` needs room for `end - start` values. */
    fun decode(b: ByteArray, start: Int, end: Int, out: IntArray, at: Int): Int {
        var i = start
        var o = at
        while (i < end) {
            val c = b[i].toInt() and 0xFF
            if (c < 0x80) {
                out[o++] = c
                i++
                continue
            }
            val len: Int
            var cp: Int
            val min: Int
            when {
                c in 0xC2..0xDF -> { len = 2; cp = c and 0x1F; min = 0x80 }
                c in 0xE0..0xEF -> { len = 3; cp = c and 0x0F; min = 0x800 }
                c in 0xF0..0xF4 -> { len = 4; cp = c and 0x07; min = 0x10000 }
                else -> return -(1 + i)
            }
            if (i + len > end) return -(1 + i)
            for (k in 1 until len) {
                val d = b[i + k].toInt() and 0xFF
                if (d and 0xC0 != 0x80) return -(1 + i)
                cp = (cp shl 6) or (d and 0x3F)
            }
            if (cp < min || cp > 0x10FFFF || (cp in 0xD800..0xDFFF)) return -(1 + i)
            out[o++] = cp
            i += len
        }
        return o - at
    }

    /** Bytes of one code point written at `out[at]`; returns how many (1-4). */
    fun encode(cp: Int, out: ByteArray, at: Int): Int {
        when {
            cp < 0x80 -> {
                out[at] = cp.toByte()
                return 1
            }
            cp < 0x800 -> {
                out[at] = (0xC0 or (cp shr 6)).toByte()
                out[at + 1] = (0x80 or (cp and 0x3F)).toByte()
                return 2
            }
            cp < 0x10000 -> {
                out[at] = (0xE0 or (cp shr 12)).toByte()
                out[at + 1] = (0x80 or ((cp shr 6) and 0x3F)).toByte()
                out[at + 2] = (0x80 or (cp and 0x3F)).toByte()
                return 3
            }
            else -> {
                out[at] = (0xF0 or (cp shr 18)).toByte()
                out[at + 1] = (0x80 or ((cp shr 12) and 0x3F)).toByte()
                out[at + 2] = (0x80 or ((cp shr 6) and 0x3F)).toByte()
                out[at + 3] = (0x80 or (cp and 0x3F)).toByte()
                return 4
            }
        }
    }

    fun length(cp: Int): Int = if (cp < 0x80) 1 else if (cp < 0x800) 2 else if (cp < 0x10000) 3 else 4
}
