// Stand-in for android.content.Context as the kit uses it, declared from the Android API
// reference (developer.android.com/reference/android/content/Context, API level 37): Kotlin's
// property syntax for the Java getters. Abstract as the real class; jvm/AndroidCheck.kt subclasses
// it over folders. The other stand-ins: AssetStubs.kt (AssetManager), LiteRtStubs.kt (LiteRT 2.2.0),
// TfliteStubs.kt (Interpreter), StandInRuntime.kt (their native side), CoroutinesStubs.kt,
// MutexStubs.kt (kotlinx.coroutines), TestStubs.kt, JUnitStubs.kt, RunnerStubs.kt, AndroidJUnit4Stub.kt
// (androidx.test and JUnit 4: compile-only, never run).
@file:Suppress("unused", "UNUSED_PARAMETER")

package android.content

import android.content.res.AssetManager
import java.io.File

abstract class Context {
    abstract val assets: AssetManager  // getAssets()
    abstract val noBackupFilesDir: File  // getNoBackupFilesDir(), API 21
    abstract val cacheDir: File  // getCacheDir()
    abstract val packageCodePath: String  // getPackageCodePath(): the APK
}
