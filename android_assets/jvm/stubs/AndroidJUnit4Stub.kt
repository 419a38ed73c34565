// Compile-only stand-in (see AndroidStubs.kt).
package androidx.test.ext.junit.runners

class AndroidJUnit4
