// Compile-only stand-ins (see AndroidStubs.kt): androidx.test and JUnit 4.
@file:Suppress("unused", "UNUSED_PARAMETER")

package androidx.test.platform.app

import android.content.Context

class Instrumentation {
    val targetContext: Context get() = throw UnsupportedOperationException("stub")  // getTargetContext()
    val context: Context get() = throw UnsupportedOperationException("stub")  // getContext(): the test APK
}

object InstrumentationRegistry {
    @JvmStatic
    fun getInstrumentation(): Instrumentation = throw UnsupportedOperationException("stub")
}
