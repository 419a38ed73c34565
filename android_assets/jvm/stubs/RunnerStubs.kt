// Compile-only stand-ins (see AndroidStubs.kt).
@file:Suppress("unused")

package org.junit.runner

import kotlin.reflect.KClass

annotation class RunWith(val value: KClass<*>)
