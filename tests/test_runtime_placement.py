"""Placement per provider from real onnxruntime profiles; the moved-to-CPU flag; kernels to nodes."""

from __future__ import annotations

import pytest

from fuseview.runtime import samples
from fuseview.runtime.inputs import make_feeds
from fuseview.runtime.placement import CPU_PROVIDER, attribute_kernels, moved_to_cpu, placement
from fuseview.runtime.profiling import profile_model


@pytest.fixture(scope="module")
def cpu_profile():
    model = samples.slow_node_model(n=64)
    return profile_model(model, make_feeds(model), "cpu", runs=2, warmup=1, threads=1)


def test_cpu_profile_places_every_node_on_the_cpu(cpu_profile):
    place = placement(cpu_profile)
    assert list(place["providers"]) == [CPU_PROVIDER]
    row = place["providers"][CPU_PROVIDER]
    assert row["nodes"] == len(cpu_profile["nodes"]) > 0
    assert row["time_us"] == pytest.approx(sum(n["mean_us"] for n in cpu_profile["nodes"]))
    assert row["share"] == pytest.approx(1.0)
    assert place["memcpy_nodes"] == []
    assert moved_to_cpu(place, place) is None


def _gpu(profile, on_cpu):
    nodes = [{**n, "provider": CPU_PROVIDER if i in on_cpu else "CUDAExecutionProvider"}
             for i, n in enumerate(profile["nodes"])]
    return placement({"nodes": nodes + [{"name": "m0", "op_type": "MemcpyToHost",
                                         "provider": CPU_PROVIDER, "mean_us": 0.0}]})


def test_fusion_that_moves_the_heaviest_node_to_the_cpu_is_flagged(cpu_profile):
    before, after = _gpu(cpu_profile, set()), _gpu(cpu_profile, {0})  # nodes are ranked: 0 is the heaviest
    assert before["memcpy_nodes"] == ["m0"]
    line = moved_to_cpu(before, after)
    assert line is not None and line.startswith("fusion moved work to the CPU")
    assert moved_to_cpu(after, before) is None


def test_kernels_attributed_by_launch_time():
    spans = [("a", 0.0, 10.0), ("b", 10.0, 20.0)]
    kernels = [(1.0, 5.0, 4.0), (2.0, 8.0, 4.0), (12.0, 30.0, 3.0), (25.0, 40.0, 2.0)]
    got = attribute_kernels(spans, kernels)
    assert got["node_device_us"] == {"a": 8.0, "b": 3.0}
    assert got["unattributed_us"] == 2.0
    assert got["busy_us"] == 7.0 + 3.0 + 2.0  # [5, 12) overlaps, then 3 and 2
    assert got["unattributed_share"] == pytest.approx(2.0 / 13.0)


def test_overlapping_and_nested_spans_give_the_launch_to_the_latest_started_span_that_holds_it():
    # whole-µs spans: a's end passes b's start; c runs inside d, and d is still open after c ends
    spans = [("a", 0.0, 11.0), ("b", 10.0, 20.0), ("d", 30.0, 50.0), ("c", 32.0, 35.0)]
    kernels = [(10.5, 0.0, 1.0), (9.0, 0.0, 2.0), (33.0, 0.0, 4.0), (40.0, 0.0, 8.0), (55.0, 0.0, 16.0)]
    got = attribute_kernels(spans, kernels)
    assert got["node_device_us"] == {"b": 1.0, "a": 2.0, "c": 4.0, "d": 8.0}  # d at 40: not lost after c
    assert got["unattributed_us"] == 16.0


def test_cuda_sessions_for_the_output_check_turn_tf32_off():
    from fuseview.runtime.sessions import CPU, CUDA, cuda_providers

    assert cuda_providers() == [CUDA, CPU]
    assert cuda_providers(tf32=False) == [(CUDA, {"use_tf32": "0"}), CPU]


def test_bound_run_gives_the_plain_runs_outputs():
    import numpy as np

    from fuseview.runtime.binding import bound_run
    from fuseview.runtime.sessions import create_session

    model = samples.slow_node_model(n=16)
    feeds = make_feeds(model)
    sess, _ = create_session(model, "cpu")
    plain = sess.run(None, feeds)
    run = bound_run(sess, feeds, device="cpu")
    assert bound_run(sess, feeds)() is None  # a CPU session keeps the plain run
    run()
    for want, got in zip(plain, run().copy_outputs_to_cpu(), strict=True):  # the binding reused
        np.testing.assert_array_equal(want, got)
