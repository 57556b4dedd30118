"""The jobs a user asks for, each one function that the CLI, the API, the Session and a Ray node call:
`tune.tune` (and a sweep item, `tune.tune_item`), `traces.open_traces` (the trace pipeline) and
`onnx_join.capture_join` (a capture's kernels joined to fuseview's fusions). They compose the layers below
(fusion, tuning, traces, runtime, targets); the session and the commands sit above them."""
