// Compile-only stand-ins for android.database.Cursor and android.database.SQLException as the kit's
// AndroidIndexDb.kt uses them, declared from the AOSP source of platform_frameworks_base
// core/java/android/database/Cursor.java (an interface extending Closeable; FIELD_TYPE_NULL 0,
// INTEGER 1, FLOAT 2, STRING 3, BLOB 4 returned by getType(int), API 11) and SQLException.java (a
// RuntimeException). Only the members the kit calls; Java getters stay functions, so the kit's calls
// compile the same against android.jar. The JVM tools never call them (jvm/JdbcIndexDb.kt).
@file:Suppress("unused", "UNUSED_PARAMETER")

package android.database

import java.io.Closeable

/** The rows of a query (android.database.Cursor, an interface). */
interface Cursor : Closeable {
    fun getColumnCount(): Int
    fun moveToNext(): Boolean
    fun getType(columnIndex: Int): Int  // API 11
    fun getLong(columnIndex: Int): Long
    fun getDouble(columnIndex: Int): Double
    fun getString(columnIndex: Int): String?
    fun getBlob(columnIndex: Int): ByteArray?
    override fun close()

    companion object {
        const val FIELD_TYPE_NULL = 0
        const val FIELD_TYPE_INTEGER = 1
        const val FIELD_TYPE_FLOAT = 2
        const val FIELD_TYPE_STRING = 3
        const val FIELD_TYPE_BLOB = 4
    }
}

/** android.database.SQLException: an unchecked exception. */
open class SQLException : RuntimeException {
    constructor() : super()
    constructor(error: String?) : super(error)
    constructor(error: String?, cause: Throwable?) : super(error, cause)
}
