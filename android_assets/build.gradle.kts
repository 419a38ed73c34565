// The Android kit as a library module (`:edgem3`). An app includes it from its settings.gradle.kts
// (README: "Adding the module") and depends on it with implementation(project(":edgem3")).
// Plugin versions come from the app's build (its root build.gradle.kts / version catalog).
plugins {
    id("com.android.library")
    id("org.jetbrains.kotlin.android")
}

android {
    namespace = "dev.edgem3"
    compileSdk = 34

    defaultConfig {
        minSdk = 24
        testInstrumentationRunner = "androidx.test.runner.AndroidJUnitRunner"
    }

    // Default source sets: src/main/java (the kit), src/main/assets/edge_m3 (the bundle, filled by
    // `make build`), src/androidTest/java + src/androidTest/assets/edge_m3 (golden.json: tests only).
    // jvm/ is CI's JVM check and is not compiled here.

    // The .tflite is memory-mapped straight from the APK: it must be stored uncompressed. This
    // covers the module's own test APK; the app's build needs the same line (README).
    androidResources {
        noCompress += listOf("tflite", "model")
    }

    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
}

kotlin {
    jvmToolchain(17)
}

dependencies {
    // LiteRT 2.x: CompiledModel with the XNNPACK weight cache (ModelRunners.kt), and the
    // org.tensorflow.lite.Interpreter API for WeightCache.Off. Runs every variant: int8's
    // per-channel FULLY_CONNECTED v12 needs TF Lite >= 2.17 kernels, int4's blockwise weights
    // LiteRT >= 2.1.6 (EdgeM3Contract.OLDEST_LITERT). `api`: WeightCache and the runners are public.
    api("com.google.ai.edge.litert:litert:2.3.0")

    // The suspending API (EdgeM3Embedder.embed / load): withContext, Dispatchers, Mutex.
    implementation("org.jetbrains.kotlinx:kotlinx-coroutines-android:1.8.1")

    // EdgeM3GoldenTest (instrumented: ./gradlew :edgem3:connectedAndroidTest).
    androidTestImplementation("androidx.test.ext:junit:1.2.1")
    androidTestImplementation("androidx.test:runner:1.6.2")
}
