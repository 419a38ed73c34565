"""Step 5, the device side: the runtimes (registry), runners for each, the device pipeline,
post-processing.

What an app does with a bundle, replayed in Python: the builder's golden vectors, `embed`,
`bench` and `verify` all go through runtime.pipeline.DevicePipeline.
"""

from edge_m3.runtime.registry import RUNTIMES, Runtime, WeightCache, available_runtimes
from edge_m3.runtime.runners import OnnxRunner, Runner, TFLiteRunner, open_runner

__all__ = ["RUNTIMES", "OnnxRunner", "Runner", "Runtime", "TFLiteRunner", "WeightCache",
           "available_runtimes", "open_runner"]
