package dev.edgem3

import java.io.Closeable
import java.io.File

// The SQLite calls EdgeM3WritableIndex makes, behind one small interface so that every decision
// (schema, checks, transactions' contents, error kinds) lives in shared code that CI runs on the
// desktop JVM: AndroidIndexDb.kt (android.database.sqlite, the app's) and jvm/JdbcIndexDb.kt (the
// xerial JDBC driver, CI's) only move values in and out and translate the driver's exceptions
// into IndexDbException with SQLite's primary result code. Kotlin 1.3, stdlib only.

/** A failure reported by SQLite, by its primary result code (sqlite3.h: `SQLITE_BUSY` = 5, ...). */
class IndexDbException(val code: Int, message: String, cause: Throwable? = null) : RuntimeException(message, cause) {
    companion object {
        const val ERROR = 1
        const val PERM = 3
        const val BUSY = 5
        const val LOCKED = 6
        const val READONLY = 8
        const val IOERR = 10
        const val CORRUPT = 11
        const val FULL = 13
        const val CANTOPEN = 14
        const val NOTADB = 26
    }
}

/** One open SQLite connection (not thread-safe: EdgeM3WritableIndex serialises its calls). */
interface IndexDb : Closeable {
    /** One statement that returns no rows, `args` bound in order: Long, Double, String, ByteArray or null. */
    fun execute(sql: String, args: List<Any?>)

    /** A statement's rows (no arguments): each column a Long, Double, String, ByteArray or null. */
    fun query(sql: String): List<Array<Any?>>

    /** `BEGIN IMMEDIATE`, `body`, `COMMIT`; rolled back when `body` or the commit throws. */
    fun <T> transaction(body: () -> T): T
}

/**
 * Binds `args` in order (SQLite's 1-based indexes) through the binding's own setters: a Long,
 * Double, String, ByteArray or null each to its setter, anything else refused (ERROR). One
 * function for both bindings, so the choice runs in CI (jvm/JdbcIndexDb.kt), not only on a phone.
 */
internal fun bindArgs(args: List<Any?>, bindNull: (Int) -> Unit, bindLong: (Int, Long) -> Unit, bindDouble: (Int, Double) -> Unit,
             bindString: (Int, String) -> Unit, bindBlob: (Int, ByteArray) -> Unit) {
    for ((i, a) in args.withIndex()) {
        when (a) {
            null -> bindNull(i + 1)
            is Long -> bindLong(i + 1, a)
            is Double -> bindDouble(i + 1, a)
            is String -> bindString(i + 1, a)
            is ByteArray -> bindBlob(i + 1, a)
            else -> throw IndexDbException(IndexDbException.ERROR, "cannot bind a ${a.javaClass.simpleName}")
        }
    }
}

/** Opens database files: one per SQLite binding. */
interface IndexDbDriver {
    /** The database in `file`, read-write (read-only when the file is); `create`: a new file if missing. */
    fun open(file: File, create: Boolean): IndexDb
}
