// Compile-only stand-ins for the few Android, TFLite and test APIs the kit uses, so CI can
// type-check EdgeM3Embedder.kt and EdgeM3GoldenTest.kt with a plain kotlinc (no Android SDK).
// Same names and call shapes as the real APIs; never executed (every body throws).
// Real sources: android.content.res.AssetManager / AssetFileDescriptor, org.tensorflow.lite
// .Interpreter (tensorflow/lite/java), LiteRT's com.google.ai.edge.litert (LiteRtStubs.kt),
// androidx.test, JUnit 4.
@file:Suppress("unused", "UNUSED_PARAMETER")

package android.content

import android.content.res.AssetManager
import java.io.File

abstract class Context {
    abstract val assets: AssetManager  // Java: getAssets()
    abstract val noBackupFilesDir: File  // getNoBackupFilesDir(), API 21
    abstract val cacheDir: File  // getCacheDir()
    abstract val packageCodePath: String  // getPackageCodePath(): the APK
}
