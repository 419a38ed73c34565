// Compile-only stand-ins for android.database.sqlite as the kit's AndroidIndexDb.kt uses it: only
// the members the kit calls, declared (not copied) from the AOSP source of
// github.com/aosp-mirror/platform_frameworks_base, core/java/android/database/sqlite/, as read for
// this file: SQLiteDatabase.java at commit ac74a023f280 (Android 15+: it has the FLAG_SQLITE_APIS_35
// read-only transactions; openDatabase(String, CursorFactory, int), beginTransactionNonExclusive =
// IMMEDIATE, setTransactionSuccessful, endTransaction, rawQuery(String, String[]), the open flags'
// values), SQLiteProgram.java and SQLiteClosable.java at 03bd302aebbb (bindNull/Long/Double/String/
// Blob, 1-based; close() releases a reference), SQLiteStatement.java at 04708b57daf0 (execute(), for
// a statement that returns no rows), SQLiteDatabaseLockedException.java at dea971338746; the other
// exception subclasses by the same pattern (a no-argument and a String constructor). compileStatement
// (String) throws SQLException (android.database). Never run: every body throws (the desktop JVM
// uses jvm/JdbcIndexDb.kt).
@file:Suppress("unused", "UNUSED_PARAMETER")

package android.database.sqlite

import android.database.Cursor
import android.database.SQLException
import java.io.Closeable

private fun stub(): Nothing = throw UnsupportedOperationException("android.database.sqlite stand-in: compile-only")

/** SQLiteClosable: reference counted; close() releases the caller's reference. */
abstract class SQLiteClosable : Closeable {
    override fun close(): Unit = stub()
}

/** SQLiteProgram: a compiled statement's bindings (1-based indexes). */
abstract class SQLiteProgram : SQLiteClosable() {
    fun bindNull(index: Int): Unit = stub()
    fun bindLong(index: Int, value: Long): Unit = stub()
    fun bindDouble(index: Int, value: Double): Unit = stub()
    fun bindString(index: Int, value: String): Unit = stub()
    fun bindBlob(index: Int, value: ByteArray): Unit = stub()
}

/** SQLiteStatement (final): execute() runs a statement that returns no rows. */
class SQLiteStatement private constructor() : SQLiteProgram() {
    fun execute(): Unit = stub()
}

/** SQLiteDatabase (final). */
class SQLiteDatabase private constructor() : SQLiteClosable() {
    /** SQLiteDatabase.CursorFactory. */
    interface CursorFactory

    fun beginTransactionNonExclusive(): Unit = stub()  // BEGIN IMMEDIATE
    fun setTransactionSuccessful(): Unit = stub()
    fun endTransaction(): Unit = stub()
    fun rawQuery(sql: String, selectionArgs: Array<String>?): Cursor = stub()
    fun compileStatement(sql: String): SQLiteStatement = stub()  // throws SQLException

    companion object {
        const val OPEN_READWRITE = 0x00000000
        const val OPEN_READONLY = 0x00000001
        const val NO_LOCALIZED_COLLATORS = 0x00000010
        const val CREATE_IF_NECESSARY = 0x10000000

        @JvmStatic
        fun openDatabase(path: String, factory: CursorFactory?, flags: Int): SQLiteDatabase = stub()
    }
}

open class SQLiteException : SQLException {
    constructor() : super()
    constructor(error: String?) : super(error)
    constructor(error: String?, cause: Throwable?) : super(error, cause)
}

class SQLiteDatabaseLockedException(error: String?) : SQLiteException(error)  // SQLITE_BUSY, SQLITE_LOCKED
class SQLiteReadOnlyDatabaseException(error: String?) : SQLiteException(error)  // SQLITE_READONLY
class SQLiteFullException(error: String?) : SQLiteException(error)  // SQLITE_FULL
class SQLiteDatabaseCorruptException(error: String?) : SQLiteException(error)  // SQLITE_CORRUPT, SQLITE_NOTADB
class SQLiteDiskIOException(error: String?) : SQLiteException(error)  // SQLITE_IOERR
class SQLiteCantOpenDatabaseException(error: String?) : SQLiteException(error)  // SQLITE_CANTOPEN
class SQLiteAccessPermException(error: String?) : SQLiteException(error)  // SQLITE_PERM
