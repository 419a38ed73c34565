// Compile-only stand-ins (see AndroidStubs.kt): JUnit 4 and the AndroidJUnit4 runner.
@file:Suppress("unused", "UNUSED_PARAMETER")

package org.junit

annotation class Test

object Assert {
    @JvmStatic
    fun assertEquals(message: String, expected: Any?, actual: Any?): Unit = throw UnsupportedOperationException("stub")

    @JvmStatic
    fun assertTrue(message: String, condition: Boolean): Unit = throw UnsupportedOperationException("stub")
}

object Assume {
    @JvmStatic
    fun assumeTrue(message: String, b: Boolean): Unit = throw UnsupportedOperationException("stub")
}
