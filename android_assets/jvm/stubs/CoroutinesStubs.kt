// Stand-ins for the kotlinx.coroutines APIs the kit uses (see AndroidStubs.kt), so CI's Kotlin 2 compiler
// type-checks the suspending API without the library and jvm/AndroidCheck.kt runs it. Same names
// and call shapes as kotlinx-coroutines-core 1.8 (Dispatchers.kt, Builders.common.kt, Job.kt,
// Exceptions.kt), written from the library's documented API, not its source. Behaviour kept where
// the kit depends on it: a Job in the context that can be cancelled; `CoroutineContext.isActive`
// and `ensureActive()` (a cancelled job: CancellationException); `withContext(dispatcher)` runs the
// block on the dispatcher's threads and, as the real one, refuses to return into a caller whose job
// was cancelled meanwhile ("prompt cancellation"). Not kept: dispatch through a
// ContinuationInterceptor (a resumed caller goes on on the thread that resumed it), child jobs,
// structured concurrency.
@file:Suppress("unused", "UNUSED_PARAMETER")

package kotlinx.coroutines

import java.util.concurrent.Executor
import java.util.concurrent.Executors
import java.util.concurrent.ThreadFactory
import java.util.concurrent.atomic.AtomicReference
import kotlin.coroutines.AbstractCoroutineContextElement
import kotlin.coroutines.Continuation
import kotlin.coroutines.CoroutineContext
import kotlin.coroutines.resume
import kotlin.coroutines.startCoroutine
import kotlin.coroutines.suspendCoroutine

/** Exceptions.kt (JVM): the JDK's class. */
typealias CancellationException = java.util.concurrent.CancellationException

/** Job.kt: the members the kit and the checks use. */
interface Job : CoroutineContext.Element {
    val isActive: Boolean
    val isCancelled: Boolean
    fun cancel(cause: CancellationException? = null)

    companion object Key : CoroutineContext.Key<Job>
}

/** Job.kt: a job completed by hand (what `Job()` returns). */
interface CompletableJob : Job {
    fun complete(): Boolean
}

private class StandInJob : AbstractCoroutineContextElement(Job), CompletableJob {
    private val cancelled = AtomicReference<CancellationException?>(null)
    @Volatile private var completed = false
    override val isActive: Boolean get() = !completed && cancelled.get() == null
    override val isCancelled: Boolean get() = cancelled.get() != null
    override fun cancel(cause: CancellationException?) {
        cancelled.compareAndSet(null, cause ?: CancellationException("Job was cancelled"))
    }
    override fun complete(): Boolean = if (isActive) { completed = true; true } else false
    fun cause(): CancellationException? = cancelled.get()
}

fun Job(parent: Job? = null): CompletableJob = StandInJob()

/** Job.kt: `get(Job)?.isActive ?: true`. */
val CoroutineContext.isActive: Boolean get() = get(Job)?.isActive ?: true

/** Job.kt: throws the job's CancellationException when it is no longer active. */
fun CoroutineContext.ensureActive() {
    get(Job)?.ensureActive()
}

fun Job.ensureActive() {
    if (!isActive) throw ((this as? StandInJob)?.cause() ?: CancellationException("Job is not active"))
}

abstract class CoroutineDispatcher internal constructor(internal val executor: Executor) :
    AbstractCoroutineContextElement(DispatcherKey)

internal object DispatcherKey : CoroutineContext.Key<CoroutineDispatcher>

interface CoroutineScope {
    val coroutineContext: CoroutineContext
}

private class StandInDispatcher(name: String) : CoroutineDispatcher(Executors.newCachedThreadPool(ThreadFactory { r ->
    Thread(r, name).also { it.isDaemon = true }
}))

object Dispatchers {
    val Default: CoroutineDispatcher = StandInDispatcher("DefaultDispatcher-worker")
    val IO: CoroutineDispatcher = StandInDispatcher("DefaultDispatcher-io")
}

private class Outcome<T>(val value: T?, val error: Throwable?)

private class Scope(override val coroutineContext: CoroutineContext) : CoroutineScope

/** Builders.common.kt: `block` in the caller's context plus `context`, on its dispatcher's threads. */
suspend fun <T> withContext(context: CoroutineContext, block: suspend CoroutineScope.() -> T): T {
    val outer = kotlin.coroutines.coroutineContext
    outer.ensureActive()
    val merged = outer + context
    val outcome = suspendCoroutine<Outcome<T>> { cont ->
        val start = Runnable {
            block.startCoroutine(Scope(merged), Continuation(merged) { r ->
                cont.resume(Outcome(r.getOrNull(), r.exceptionOrNull()))
            })
        }
        val dispatcher = context[DispatcherKey]
        if (dispatcher != null) dispatcher.executor.execute(start) else start.run()
    }
    outer.ensureActive()  // prompt cancellation: a cancelled caller never gets the result
    if (outcome.error != null) throw outcome.error
    @Suppress("UNCHECKED_CAST")
    return outcome.value as T
}
