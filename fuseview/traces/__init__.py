"""Profiler traces (torch.profiler / Kineto and onnxruntime Chrome-trace JSON): read, summarise, compare.

No Qt here. reader -> events, stats -> per-step and per-name statistics, kernels -> which ops an Inductor
kernel fused, compare -> the before/after diff, report -> the `fuseview.trace_compare` JSON file.
"""
