"""Runtime layer: onnxruntime sessions, inputs, profiling, comparison, reports. Imports no Qt."""
