// Compile-only stand-ins (see CoroutinesStubs.kt): kotlinx.coroutines.sync (Mutex.kt).
@file:Suppress("unused", "UNUSED_PARAMETER")

package kotlinx.coroutines.sync

interface Mutex {
    val isLocked: Boolean
}

fun Mutex(locked: Boolean = false): Mutex = throw UnsupportedOperationException("stub")

suspend inline fun <T> Mutex.withLock(owner: Any? = null, action: () -> T): T = throw UnsupportedOperationException("stub")
