// JVM-only (not part of the app): EdgeM3WritableIndex's SQLite on a desktop JVM, through JDBC and
// the xerial driver (Debian: libxerial-sqlite-jdbc-java, /usr/share/java/sqlite-jdbc.jar; put it on
// the classpath beside the kit jar). Only java.sql is compiled against; the driver is found by
// DriverManager. The twin of AndroidIndexDb.kt: values in and out, SQLite's result codes out.
package dev.edgem3

import java.io.File
import java.sql.Connection
import java.sql.DriverManager
import java.sql.SQLException
import java.sql.Types
import java.util.Properties

/** Opens index databases with the JDBC driver `jdbc:sqlite:`. */
object JdbcIndexDbDriver : IndexDbDriver {
    // sqlite3.h open flags, read by the xerial driver's "open_mode" property.
    private const val OPEN_READWRITE = 0x2
    private const val OPEN_CREATE = 0x4

    override fun open(file: File, create: Boolean): IndexDb = JdbcIndexDb.call {
        if (!create && !file.isFile) throw IndexDbException(IndexDbException.CANTOPEN, "$file: no such database")
        val props = Properties()
        props.setProperty("open_mode", (OPEN_READWRITE or (if (create) OPEN_CREATE else 0)).toString())
        val c = try {
            DriverManager.getConnection("jdbc:sqlite:" + file.path, props)
        } catch (e: SQLException) {
            if (e.message?.contains("No suitable driver") == true) {
                throw EdgeM3Exception("the SQLite JDBC driver is not on the classpath (Debian: libxerial-sqlite-jdbc-java, " +
                    "/usr/share/java/sqlite-jdbc.jar)")
            }
            throw e
        }
        JdbcIndexDb(c)
    }
}

class JdbcIndexDb(private val c: Connection) : IndexDb {
    override fun execute(sql: String, args: List<Any?>) = call {
        val ps = c.prepareStatement(sql)
        try {
            bindArgs(args, { ps.setNull(it, Types.NULL) }, ps::setLong, ps::setDouble, ps::setString, ps::setBytes)
            ps.execute()
        } finally {
            ps.close()
        }
        Unit
    }

    override fun query(sql: String): List<Array<Any?>> = call {
        val st = c.createStatement()
        try {
            val rs = st.executeQuery(sql)
            run {
                val n = rs.metaData.columnCount
                val out = ArrayList<Array<Any?>>()
                while (rs.next()) {
                    out.add(Array(n) { i ->
                        when (val x = rs.getObject(i + 1)) {
                            is Int -> x.toLong()
                            is Float -> x.toDouble()
                            else -> x
                        }
                    })
                }
                out
            }
        } finally {
            st.close()
        }
    }

    override fun <T> transaction(body: () -> T): T {
        call { run("BEGIN IMMEDIATE") }
        var done = false
        try {
            val r = body()
            call { run("COMMIT") }
            done = true
            return r
        } finally {
            if (!done) {
                try {
                    run("ROLLBACK")
                } catch (e: SQLException) {
                    // already rolled back by SQLite (a failed COMMIT, a full disk)
                }
            }
        }
    }

    private fun run(sql: String) {
        val st = c.createStatement()
        try {
            st.execute(sql)
        } finally {
            st.close()
        }
    }

    override fun close() = c.close()

    companion object {
        /** `body` with the driver's SQLExceptions as IndexDbException (SQLite's primary result code). */
        internal fun <T> call(body: () -> T): T = try {
            body()
        } catch (e: SQLException) {
            val code = e.errorCode and 0xff
            throw IndexDbException(if (code == 0) IndexDbException.ERROR else code, e.message ?: "SQLite error", e)
        }
    }
}
