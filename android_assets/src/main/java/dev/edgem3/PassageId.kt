package dev.edgem3

/**
 * A passage's id: a 64-bit integer or a string, never both (docs/index-format.md, its ids.json section).
 * The one id type of EdgeM3Index and EdgeM3WritableIndex, as Swift's `PassageID` (`.int(Int64)`,
 * `.string(String)`) and Python's `int | str`: `Num(5)` and `Str("5")` are two passages.
 * `toString` is the bare value (a number's digits, a string's text), as ids printed before.
 */
sealed class PassageId {
    /** The value as JSON and SQLite hold it: a Long or a String. */
    abstract val value: Any

    /** An integer id (int64). */
    data class Num(override val value: Long) : PassageId() {
        override fun toString(): String = value.toString()
    }

    /** A string id. */
    data class Str(override val value: String) : PassageId() {
        override fun toString(): String = value
    }

    /** As the kit's messages name an id: a number as is, a string in double quotes. */
    internal fun show(): String = if (this is Str) "\"$value\"" else value.toString()

    companion object {
        @JvmStatic
        fun of(value: Long): PassageId = Num(value)

        @JvmStatic
        fun of(value: Int): PassageId = Num(value.toLong())

        @JvmStatic
        fun of(value: String): PassageId = Str(value)

        /** A value of unknown type (a parsed JSON value, a Java caller's Object) as an id: an integer
         *  of any width or a string, else EdgeM3Exception (as Python refuses an id neither int nor str). */
        @JvmStatic
        fun from(value: Any): PassageId = when (value) {
            is String -> Str(value)
            is Long -> Num(value)
            is Int -> Num(value.toLong())
            is Short -> Num(value.toLong())
            is Byte -> Num(value.toLong())
            else -> throw EdgeM3Exception("id $value: must be an integer or a string")
        }

        /** A JSON or SQLite value (a Long or a String) as an id; null for anything else. */
        internal fun ofValue(x: Any?): PassageId? = when (x) {
            is String -> Str(x)
            is Long -> Num(x)
            is Int -> Num(x.toLong())
            else -> null
        }
    }
}
