// Compile-only stand-ins for the few kotlinx.coroutines APIs the kit uses (see AndroidStubs.kt),
// so CI's kotlinc type-checks the suspending API without the library. Same names and call
// shapes as kotlinx-coroutines-core 1.8 (Dispatchers.kt, Builders.common.kt); never executed.
@file:Suppress("unused", "UNUSED_PARAMETER")

package kotlinx.coroutines

import kotlin.coroutines.CoroutineContext

abstract class CoroutineDispatcher : CoroutineContext

interface CoroutineScope {
    val coroutineContext: CoroutineContext
}

object Dispatchers {
    val Default: CoroutineDispatcher get() = throw UnsupportedOperationException("stub")
    val IO: CoroutineDispatcher get() = throw UnsupportedOperationException("stub")
}

suspend fun <T> withContext(context: CoroutineContext, block: suspend CoroutineScope.() -> T): T =
    throw UnsupportedOperationException("stub")
