// The Android kit as a library module (`:edgem3`). An app includes it from its settings.gradle.kts
// (README: "From `make build` to a running app") and depends on it with implementation(project(":edgem3")).
// Versions come from the app's version catalog (gradle/libs.versions.toml: the entries in this
// folder's gradle/libs.versions.toml). Android Gradle plugin 9+: Kotlin is built in, so no
// org.jetbrains.kotlin.android plugin (AGP 9 refuses it) and no kotlin { } block.
plugins {
    alias(libs.plugins.android.library)
}

android {
    namespace = "dev.edgem3"
    compileSdk = 37

    defaultConfig {
        minSdk = 24
        testInstrumentationRunner = "androidx.test.runner.AndroidJUnitRunner"
        // R8 keep rules for what LiteRT's JNI looks up by name (README, "Release builds (R8)"):
        // packaged into the AAR and applied to every app that minifies, so the app adds none.
        consumerProguardFiles("consumer-rules.pro")
    }

    // Default source sets: src/main/java (the kit), src/main/assets/edge_m3 (the bundle, filled by
    // `make build`), src/androidTest/java + src/androidTest/assets/edge_m3 (golden.json: tests only).
    // jvm/ is CI's JVM check and is not compiled here.

    // The .tflite is memory-mapped straight from the APK or copied by LiteRT from it: it must be
    // stored uncompressed. This covers the module's own test APK; the app's build needs the same line (README).
    androidResources {
        noCompress += listOf("tflite", "model")
    }

    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }
}

dependencies {
    // LiteRT 2.x: CompiledModel with the XNNPACK weight cache (ModelRunners.kt), and the
    // org.tensorflow.lite.Interpreter API for WeightCache.Off. Runs every variant: int8's
    // per-channel FULLY_CONNECTED v12 needs TF Lite >= 2.17 kernels, int4's blockwise weights
    // LiteRT >= 2.1.6 (EdgeM3Contract.OLDEST_LITERT). `api`: WeightCache and the runners are public.
    api(libs.litert)

    // The suspending API (EdgeM3Embedder.embed / load): withContext, Dispatchers, Mutex.
    implementation(libs.kotlinx.coroutines.android)

    // EdgeM3GoldenTest (instrumented: ./gradlew :edgem3:connectedAndroidTest).
    androidTestImplementation(libs.androidx.test.ext.junit)
    androidTestImplementation(libs.androidx.test.runner)
}
