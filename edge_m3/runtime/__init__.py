"""Step 5, the device side: runners for each runtime, the device pipeline, post-processing.

What an app does with a bundle, replayed in Python: the builder's golden vectors, `embed`,
`bench` and `verify` all go through runtime.pipeline.DevicePipeline.
"""

from edge_m3.runtime.runners import (
    RUNTIMES,
    TFLITE_RUNTIMES,
    OnnxRunner,
    Runner,
    TFLiteRunner,
    available_runtimes,
    format_of,
    open_runner,
    runtime_version,
)

__all__ = ["RUNTIMES", "TFLITE_RUNTIMES", "OnnxRunner", "Runner", "TFLiteRunner", "available_runtimes",
           "format_of", "open_runner", "runtime_version"]
