// The conformance suite of the index format (docs/conformance.md) for the Kotlin kit: one JUnit 4
// test per case folder that tests/conformance/generate.py wrote under -Dedgem3.conformance=DIR
// (DIR/index/NAME/case.json and its input/). Not part of the app, nor of the kit jar
// (tools/kit/kit_jar.sh compiles android_assets/jvm/*.kt only): tests/test_conformance.py
// compiles it against the kit jar and Debian's junit4 and runs it with org.junit.runner.JUnitCore.
package dev.edgem3.conformance

import dev.edgem3.EdgeM3Failure
import dev.edgem3.EdgeM3Index
import dev.edgem3.EdgeM3WritableIndex
import dev.edgem3.JdbcIndexDbDriver
import dev.edgem3.MiniJson
import dev.edgem3.PassageId
import org.junit.Test
import org.junit.runner.RunWith
import org.junit.runners.Parameterized
import java.io.File

@RunWith(Parameterized::class)
class IndexConformanceTest(private val name: String) {
    companion object {
        private fun root(): File = File(System.getProperty("edgem3.conformance")
            ?: throw IllegalStateException("set -Dedgem3.conformance to the generated cases' folder"), "index")

        @JvmStatic
        @Parameterized.Parameters(name = "{0}")
        fun cases(): List<Array<Any>> =
            (root().listFiles() ?: emptyArray()).filter { File(it, "case.json").isFile }.map { it.name }.sorted()
                .map { arrayOf<Any>(it) }

        /** A passage id as every runner renders it (tests/test_conformance.py render_id): the one
         *  place to change with the id type. */
        fun renderId(id: Any?): String = when (id) {
            is String -> "\"" + id.replace("\\", "\\\\").replace("\"", "\\\"") + "\""
            is Number -> id.toLong().toString()
            is PassageId -> renderId(id.value)
            else -> id.toString()
        }
    }

    /** A failure of this case (JUnit reports an AssertionError as one), naming it. */
    private fun fail(message: String): Nothing = throw AssertionError(message)

    private class Outcome(val error: String?, val message: String, val count: Int, val ids: List<String>)

    @Suppress("UNCHECKED_CAST")
    private fun outcome(case: Map<String, Any?>, folder: File): Outcome {
        val open = case["open"] as Map<String, Any?>? ?: emptyMap()
        val bundleFiles = (open["bundle_files"] as Map<String, Any?>?)?.mapValues { it.value as String }
        val verify = open["verify"] as Boolean? ?: true
        return try {
            if (case["reader"] == "writable") {
                if (!verify) fail("$name: a writable index is always verified")
                EdgeM3WritableIndex.open(folder, JdbcIndexDbDriver, bundleFiles).use { x ->
                    val ids = x.ids().map(::renderId)
                    Outcome(null, "", x.count, ids)
                }
            } else {
                val ids = EdgeM3Index.open(folder, bundleFiles, verify).ids.distinct().map(::renderId)
                Outcome(null, "", ids.size, ids)
            }
        } catch (e: Exception) {
            if (e !is EdgeM3Failure) throw AssertionError("$name: threw ${e.javaClass.name}: ${e.message}", e)
            Outcome(e.kind.wire, e.message ?: "", -1, emptyList())
        }
    }

    @Test
    @Suppress("UNCHECKED_CAST")
    fun conforms() {
        val dir = File(root(), name)
        val case = MiniJson.parse(File(dir, "case.json").readText()) as Map<String, Any?>
        val expect = case["expect"] as Map<String, Any?>
        val got = outcome(case, File(dir, "input"))
        val error = expect["error"] as String?
        if (error != null) {
            if (got.error != error) fail("$name: expected error $error, got ${got.error ?: "count ${got.count} ids ${got.ids}"} ${got.message}")
            if ('\n' in got.message) fail("$name: a message of several lines: ${got.message}")
            val part = (expect["messages"] as Map<String, Any?>?)?.get("kotlin") as String?
            if (part != null && part !in got.message) fail("$name: message \"${got.message}\" lacks \"$part\"")
        } else {
            val ids = (expect["ids"] as List<Any?>).map(::renderId)
            val count = (expect["count"] as Number).toInt()
            if (got.error != null || got.ids != ids || got.count != count)
                fail("$name: expected count $count ids $ids, got ${got.error ?: "count ${got.count} ids ${got.ids}"} ${got.message}")
        }
    }
}
