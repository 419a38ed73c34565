package dev.edgem3

import android.database.Cursor
import android.database.sqlite.SQLiteAccessPermException
import android.database.sqlite.SQLiteCantOpenDatabaseException
import android.database.sqlite.SQLiteDatabase
import android.database.sqlite.SQLiteDatabaseCorruptException
import android.database.sqlite.SQLiteDatabaseLockedException
import android.database.sqlite.SQLiteDiskIOException
import android.database.sqlite.SQLiteException
import android.database.sqlite.SQLiteFullException
import android.database.sqlite.SQLiteReadOnlyDatabaseException
import java.io.File

// EdgeM3WritableIndex's SQLite on Android: android.database.sqlite, the platform's own. A thin
// adapter (values in and out, exceptions to SQLite's result codes); every decision is in the
// shared code that CI runs through jvm/JdbcIndexDb.kt. The database stays on one connection (no
// enableWriteAheadLogging, whose pool would answer `PRAGMA data_version` from several connections,
// each counting commits its own way): EdgeM3WritableIndex sets `PRAGMA journal_mode = WAL` itself,
// which is persistent in the file. Compiled here against jvm/stubs/SqliteStubs.kt; never run in CI.

/** Opens index databases with android.database.sqlite. */
object AndroidIndexDbDriver : IndexDbDriver {
    override fun open(file: File, create: Boolean): IndexDb = AndroidIndexDb.call {
        if (!create && !file.isFile) throw IndexDbException(IndexDbException.CANTOPEN, "$file: no such database")
        val flags = SQLiteDatabase.OPEN_READWRITE or SQLiteDatabase.NO_LOCALIZED_COLLATORS or
            (if (create) SQLiteDatabase.CREATE_IF_NECESSARY else 0)
        AndroidIndexDb(SQLiteDatabase.openDatabase(file.path, null, flags))
    }
}

class AndroidIndexDb(private val db: SQLiteDatabase) : IndexDb {
    override fun execute(sql: String, args: List<Any?>) = call {
        val st = db.compileStatement(sql)
        try {
            bindArgs(args, st::bindNull, st::bindLong, st::bindDouble, st::bindString, st::bindBlob)
            st.execute()
        } finally {
            st.close()
        }
    }

    override fun query(sql: String): List<Array<Any?>> = call {
        val c = db.rawQuery(sql, null)
        try {
            val out = ArrayList<Array<Any?>>()
            val n = c.getColumnCount()
            while (c.moveToNext()) {
                out.add(Array(n) { i ->
                    when (c.getType(i)) {
                        Cursor.FIELD_TYPE_NULL -> null
                        Cursor.FIELD_TYPE_INTEGER -> c.getLong(i)
                        Cursor.FIELD_TYPE_FLOAT -> c.getDouble(i)
                        Cursor.FIELD_TYPE_STRING -> c.getString(i)
                        else -> c.getBlob(i)
                    }
                })
            }
            out
        } finally {
            c.close()
        }
    }

    override fun <T> transaction(body: () -> T): T {
        call { db.beginTransactionNonExclusive() }  // BEGIN IMMEDIATE
        try {
            val r = body()
            call { db.setTransactionSuccessful() }
            return r
        } finally {
            call { db.endTransaction() }  // COMMIT when marked successful, else ROLLBACK
        }
    }

    override fun close() = db.close()

    companion object {
        /** `body` with android.database.sqlite's exceptions as IndexDbException (SQLite's primary codes). */
        internal fun <T> call(body: () -> T): T = try {
            body()
        } catch (e: SQLiteException) {
            val code = when (e) {
                is SQLiteDatabaseLockedException -> IndexDbException.BUSY
                is SQLiteReadOnlyDatabaseException -> IndexDbException.READONLY
                is SQLiteFullException -> IndexDbException.FULL
                is SQLiteDatabaseCorruptException -> IndexDbException.CORRUPT
                is SQLiteDiskIOException -> IndexDbException.IOERR
                is SQLiteCantOpenDatabaseException -> IndexDbException.CANTOPEN
                is SQLiteAccessPermException -> IndexDbException.PERM
                else -> IndexDbException.ERROR
            }
            throw IndexDbException(code, e.message ?: e.javaClass.simpleName, e)
        }
    }
}
