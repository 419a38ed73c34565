"""edge-m3: BGE-M3 as verified TFLite/ONNX bundles for mobile and edge apps."""

__version__ = "0.1.0"
