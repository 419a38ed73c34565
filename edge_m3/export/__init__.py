"""Step 3: the Keras model traced once (trace), converted to TFLite (tflite) and ONNX (onnx,
onnx_lift), each heavy phase in a child process (worker)."""
