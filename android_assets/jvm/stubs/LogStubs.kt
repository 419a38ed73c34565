// Stand-in for android.util.Log as the README's quickstart calls it, declared from the Android API
// reference (developer.android.com/reference/android/util/Log: `public static int i(String tag,
// String msg)`): compile-only, so that tests/test_readme.py compiles the app snippet against the kit.
@file:Suppress("unused", "UNUSED_PARAMETER")

package android.util

object Log {
    @JvmStatic
    fun i(tag: String, msg: String): Int = 0
}
