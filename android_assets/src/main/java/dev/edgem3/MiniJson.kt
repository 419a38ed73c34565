package dev.edgem3

import kotlin.math.floor

/**
 * A small strict JSON reader, so the kit needs no JSON library on the JVM (CI) or on Android.
 *
 * Objects become `LinkedHashMap<String, Any?>`, arrays `ArrayList<Any?>`, integers `Long`,
 * other numbers `Double` (Java's correctly rounded parser: a float32 written by Python's
 * `json` reads back bit for bit after `.toFloat()`), plus `String`, `Boolean` and `null`.
 * On Android `org.json` would also do; this keeps one parser for the test and the app.
 */
object MiniJson {
    private val NUMBER = Regex("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?")
    fun parse(text: String): Any? {
        val p = Parser(text)
        p.skipSpace()
        val value = p.value()
        p.skipSpace()
        if (p.pos != text.length) throw p.error("trailing characters")
        return value
    }

    /** Deepest nesting read: deeper input is refused before it overflows the stack (issue 38:
     *  `[` x 5000 was a StackOverflowError; Python's reader refuses it too). */
    const val MAX_DEPTH = 512

    private class Parser(val s: String) {
        var pos = 0
        var depth = 0

        fun error(what: String): EdgeM3Exception = EdgeM3Exception("JSON: $what at offset $pos")

        fun skipSpace() {
            while (pos < s.length && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == '\t')) pos++
        }

        fun value(): Any? {
            if (pos >= s.length) throw error("unexpected end")
            val c = s[pos]
            if ((c == '{' || c == '[') && depth >= MAX_DEPTH) throw error("nested deeper than $MAX_DEPTH")
            return when {
                c == '{' -> { depth++; obj().also { depth-- } }
                c == '[' -> { depth++; array().also { depth-- } }
                c == '"' -> string()
                c == '-' || (c in '0'..'9') -> number()
                s.startsWith("true", pos) -> { pos += 4; true }
                s.startsWith("false", pos) -> { pos += 5; false }
                s.startsWith("null", pos) -> { pos += 4; null }
                else -> throw error("unexpected ${quoted(c.toString())}")
            }
        }

        fun obj(): Map<String, Any?> {
            val out = LinkedHashMap<String, Any?>()
            pos++
            skipSpace()
            if (pos < s.length && s[pos] == '}') { pos++; return out }
            while (true) {
                skipSpace()
                if (pos >= s.length || s[pos] != '"') throw error("expected a key")
                val key = string()
                skipSpace()
                if (pos >= s.length || s[pos] != ':') throw error("expected ':'")
                pos++
                skipSpace()
                out[key] = value()
                skipSpace()
                if (pos >= s.length) throw error("unterminated object")
                if (s[pos] == ',') { pos++; continue }
                if (s[pos] == '}') { pos++; return out }
                throw error("expected ',' or '}'")
            }
        }

        fun array(): List<Any?> {
            val out = ArrayList<Any?>()
            pos++
            skipSpace()
            if (pos < s.length && s[pos] == ']') { pos++; return out }
            while (true) {
                skipSpace()
                out.add(value())
                skipSpace()
                if (pos >= s.length) throw error("unterminated array")
                if (s[pos] == ',') { pos++; continue }
                if (s[pos] == ']') { pos++; return out }
                throw error("expected ',' or ']'")
            }
        }

        fun string(): String {
            pos++
            val sb = StringBuilder()
            while (true) {
                if (pos >= s.length) throw error("unterminated string")
                val c = s[pos++]
                if (c == '"') return sb.toString()
                // JSON has no raw control characters in strings; Python's json and Swift's refuse them (issue 38)
                if (c < ' ') throw error("control character ${quoted(c.toString())} in a string")
                if (c != '\\') { sb.append(c); continue }
                if (pos >= s.length) throw error("unterminated escape")
                val e = s[pos++]
                when (e) {
                    '"' -> sb.append('"')
                    '\\' -> sb.append('\\')
                    '/' -> sb.append('/')
                    'b' -> sb.append('\b')
                    'f' -> sb.append('\u000c')
                    'n' -> sb.append('\n')
                    'r' -> sb.append('\r')
                    't' -> sb.append('\t')
                    'u' -> {
                        if (pos + 4 > s.length) throw error("short \\u escape")
                        val hex = s.substring(pos, pos + 4)  // four hex digits: toInt(16) alone takes "+12f" (issue 38)
                        if (!hex.all { it in '0'..'9' || it in 'a'..'f' || it in 'A'..'F' }) throw error("bad \\u escape")
                        // Surrogate pairs arrive as two escapes; UTF-16 joins them by itself.
                        sb.append(hex.toInt(16).toChar())
                        pos += 4
                    }
                    else -> throw error("bad escape ${quoted("\\" + e)}")  // quoted: a line break stays one line
                }
            }
        }

        fun number(): Any {
            val start = pos
            var integral = true
            while (pos < s.length) {
                val c = s[pos]
                if (c in '0'..'9' || c == '-' || c == '+') {
                    pos++
                } else if (c == '.' || c == 'e' || c == 'E') {
                    integral = false
                    pos++
                } else {
                    break
                }
            }
            val t = s.substring(start, pos)
            // JSON's grammar exactly: Java's parsers also take "044", "+1", "1." (issue 38: Python and
            // Swift refuse a leading zero, this took it)
            if (!NUMBER.matches(t)) throw error("bad number '$t'")
            try {
                return if (integral) (t.toLongOrNull() ?: t.toDouble()) else t.toDouble()
            } catch (exc: NumberFormatException) {
                throw error("bad number '$t'")
            }
        }
    }
}

/** Typed access to parsed JSON trees (MiniJson's, or org.json converted to maps and lists). */
object JsonTree {
    @Suppress("UNCHECKED_CAST")
    fun obj(x: Any?, where: String): Map<String, Any?> =
        x as? Map<String, Any?> ?: throw EdgeM3Exception("$where: expected a JSON object")

    fun list(x: Any?, where: String): List<Any?> =
        x as? List<Any?> ?: throw EdgeM3Exception("$where: expected a JSON array")

    fun field(tree: Map<String, Any?>, key: String, where: String): Any? {
        if (!tree.containsKey(key)) throw EdgeM3Exception("$where: missing \"$key\"")
        return tree[key]
    }

    fun str(x: Any?, where: String): String =
        x as? String ?: throw EdgeM3Exception("$where: expected a string")

    fun bool(x: Any?, where: String): Boolean =
        x as? Boolean ?: throw EdgeM3Exception("$where: expected true or false")

    fun int(x: Any?, where: String): Int {
        val n = x as? Number ?: throw EdgeM3Exception("$where: expected an integer")
        val d = n.toDouble()
        if (d != floor(d) || d < Int.MIN_VALUE || d > Int.MAX_VALUE) {
            throw EdgeM3Exception("$where: expected an integer, got $x")
        }
        return n.toInt()
    }

    fun long(x: Any?, where: String): Long {
        val n = x as? Number ?: throw EdgeM3Exception("$where: expected an integer")
        if (n !is Long && n !is Int) throw EdgeM3Exception("$where: expected an integer, got $x")
        return n.toLong()
    }

    fun float(x: Any?, where: String): Float {
        val n = x as? Number ?: throw EdgeM3Exception("$where: expected a number")
        return n.toDouble().toFloat()  // the double nearest the text, then float32: bit exact
    }

    fun ints(x: Any?, where: String): IntArray {
        val l = list(x, where)
        return IntArray(l.size) { int(l[it], "$where[$it]") }
    }

    fun floats(x: Any?, where: String): FloatArray {
        val l = list(x, where)
        return FloatArray(l.size) { float(l[it], "$where[$it]") }
    }

    fun matrix(x: Any?, where: String): Array<FloatArray> {
        val l = list(x, where)
        return Array(l.size) { floats(l[it], "$where[$it]") }
    }
}
