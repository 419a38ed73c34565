package dev.edgem3

/** JSON as Python's json.dumps writes it (indent >= 0: json.dumps(x, indent=n); -1: one line, ", " and ": "). */
internal object PyJson {
    fun dumps(x: Any?, indent: Int, asciiOnly: Boolean): String {
        val sb = StringBuilder()
        write(sb, x, indent, 0, asciiOnly)
        return sb.toString()
    }

    private fun write(sb: StringBuilder, x: Any?, indent: Int, level: Int, ascii: Boolean) {
        when (x) {
            null -> sb.append("null")
            is Boolean -> sb.append(if (x) "true" else "false")
            is Long, is Int -> sb.append(x.toString())
            is String -> string(sb, x, ascii)
            is Map<*, *> -> {
                if (x.isEmpty()) { sb.append("{}"); return }
                sb.append('{')
                var first = true
                for ((k, v) in x) {
                    if (!first) sb.append(',')
                    first = false
                    newline(sb, indent, level + 1)
                    string(sb, k as String, ascii)
                    sb.append(": ")
                    write(sb, v, indent, level + 1, ascii)
                }
                newline(sb, indent, level)
                sb.append('}')
            }
            is List<*> -> {
                if (x.isEmpty()) { sb.append("[]"); return }
                sb.append('[')
                var first = true
                for (v in x) {
                    if (!first) sb.append(',')
                    first = false
                    newline(sb, indent, level + 1)
                    write(sb, v, indent, level + 1, ascii)
                }
                newline(sb, indent, level)
                sb.append(']')
            }
            else -> throw EdgeM3Exception("JSON: cannot write a ${x.javaClass.simpleName}")
        }
    }

    private fun newline(sb: StringBuilder, indent: Int, level: Int) {
        if (indent < 0) {
            if (sb.last() == ',') sb.append(' ')
            return
        }
        sb.append('\n')
        for (i in 0 until indent * level) sb.append(' ')
    }

    private fun string(sb: StringBuilder, s: String, ascii: Boolean) {
        sb.append('"')
        for (c in s) {
            when {
                c == '"' -> sb.append("\\\"")
                c == '\\' -> sb.append("\\\\")
                c == '\n' -> sb.append("\\n")
                c == '\r' -> sb.append("\\r")
                c == '\t' -> sb.append("\\t")
                c == '\b' -> sb.append("\\b")
                c == '\u000c' -> sb.append("\\f")
                c.code < 0x20 || (ascii && c.code > 0x7e) -> sb.append(String.format("\\u%04x", c.code))
                else -> sb.append(c)
            }
        }
        sb.append('"')
    }
}
