// Stand-in for kotlinx.coroutines.sync (kotlinx-coroutines-core 1.8, Mutex.kt): the members the
// kit uses, written from the library's documented API (its source was not re-read here). Not
// suspending: lock() blocks the thread (a Semaphore) where the real one suspends; enough for the
// constructor to work on the JVM (EdgeM3Embedder makes one) and for blocking-path checks.
@file:Suppress("unused", "UNUSED_PARAMETER")

package kotlinx.coroutines.sync

import java.util.concurrent.Semaphore

interface Mutex {
    val isLocked: Boolean
    fun tryLock(owner: Any? = null): Boolean
    suspend fun lock(owner: Any? = null)
    fun unlock(owner: Any? = null)
}

private class StandInMutex(locked: Boolean) : Mutex {
    private val permits = Semaphore(if (locked) 0 else 1)
    override val isLocked: Boolean get() = permits.availablePermits() == 0
    override fun tryLock(owner: Any?): Boolean = permits.tryAcquire()
    override suspend fun lock(owner: Any?) = permits.acquire()
    override fun unlock(owner: Any?) {
        check(isLocked) { "This mutex is not locked" }
        permits.release()
    }
}

fun Mutex(locked: Boolean = false): Mutex = StandInMutex(locked)

suspend inline fun <T> Mutex.withLock(owner: Any? = null, action: () -> T): T {
    lock(owner)
    try {
        return action()
    } finally {
        unlock(owner)
    }
}
