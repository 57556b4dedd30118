"""A --target ray:ADDRESS that is not a Ray head ends within seconds in one line (issue 38, finding 2): an
idle TCP listener and an HTTP server (both started here) fail the gRPC handshake probe; a port out of range
and ray:local (which made ray.init start a private cluster for 43 s) are refused before Ray is imported."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuseview.errors import FuseviewError
from fuseview.targets import parse_target

from .conftest import ASSET_MODELS, ROOT
from .test_ray_auth import silent_grpc  # noqa: F401 - a fixture

MLP = ASSET_MODELS / "mlp_gelu_tanh_ts17.onnx"


def _fuseview(argv: list[str], home: Path, timeout: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home)}
    env.pop("RAY_ADDRESS", None)
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "fuseview", *argv], capture_output=True, text=True,
                         timeout=timeout, env=env)
    return run, time.monotonic() - t0


@pytest.fixture()
def idle_listener() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture()
def http_server() -> Iterator[int]:
    srv = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_port
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("server", ["idle_listener", "http_server"])
@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_listener_that_is_not_a_ray_head_is_one_line_within_seconds(server, request, tmp_path) -> None:
    pytest.importorskip("ray")
    port = request.getfixturevalue(server)
    out = tmp_path / "r.json"
    run, took = _fuseview(["profile", str(MLP), "--target", f"ray:127.0.0.1:{port}", "--json", str(out),
                           "--quiet"], tmp_path)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "is not a Ray head" in lines[0], run.stderr[-800:]
    assert run.stdout == "" and not out.exists() and took < 30, took
    assert not (tmp_path / ".ray").exists()


@pytest.mark.parametrize("spec, words", [("ray:127.0.0.1:-1", "port must be a number"),
                                         ("ray:127.0.0.1:70000", "port must be a number"),
                                         ("ray:local", "is not a cluster"), ("ray:host", "HOST:PORT")])
def test_addresses_ray_cannot_mean_are_refused_before_ray(spec: str, words: str) -> None:
    with pytest.raises(FuseviewError, match=words):
        parse_target(spec)


def test_ray_local_is_one_line_at_once_and_writes_no_token(tmp_path) -> None:
    run, took = _fuseview(["tune", str(MLP), "-o", str(tmp_path / "t.onnx"), "--budget", "5", "--target",
                           "ray:local"], tmp_path)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "--target local" in lines[0], run.stderr[-800:]
    assert took < 20 and run.stdout == "" and not (tmp_path / ".ray").exists()


@pytest.fixture()
def refused_port() -> int:
    """A port nothing listens on (bound, then closed): the connect is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("server, command", [("idle_listener", "tune"), ("http_server", "tune"),
                                             ("silent_grpc", "tune"), ("silent_grpc", "profile"),
                                             ("silent_grpc", "sweep")])
@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_failed_connect_ends_within_the_budget(server, command, refused_port, request, tmp_path) -> None:
    """--budget 2: the probes and ray.init share it (before: 5 s of probe on an idle listener, 20 s of
    ray.init on a gRPC server that is no Ray head, whatever the budget)."""
    pytest.importorskip("ray")
    port = request.getfixturevalue(server)
    out = {"tune": ["-o", str(tmp_path / "t.onnx")], "profile": ["--json", str(tmp_path / "r.json")],
           "sweep": ["-o", str(tmp_path / "sweep")]}[command]
    argv = [command, str(MLP), *out, "--budget", "2", "--quiet", "--target"]
    # the same start-up (Python, fuseview, import ray) ending at a refused connect: what is not the connect
    base, start_up = _fuseview([*argv, f"ray:127.0.0.1:{refused_port}"], tmp_path)
    assert base.returncode == 2 and "cannot reach" in base.stderr, base.stderr[-800:]
    run, took = _fuseview([*argv, f"ray:127.0.0.1:{port}"], tmp_path)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr[-2000:]
    assert lines[0].startswith("fuseview: error: ") and f"127.0.0.1:{port}" in lines[0], lines
    cause = {"idle_listener": "gave no answer", "http_server": "not gRPC", "silent_grpc": "no Ray session"}
    assert cause[server] in lines[0], lines
    assert run.stdout == "" and took - start_up < 2 + 1.5, (took, start_up, lines)
    assert not list(tmp_path.glob("[tr].*")) and not list(tmp_path.glob("sweep/*"))
    assert not (tmp_path / ".ray").exists()


def _ends_within(call, budget: float) -> str:
    """The TargetError of call(), which must come within budget + 1.5 s (the connect's share only)."""
    from fuseview.errors import TargetError

    t0 = time.monotonic()
    with pytest.raises(TargetError) as err:
        call()
    took = time.monotonic() - t0
    assert took < budget + 1.5, (took, str(err.value))
    return str(err.value)


@pytest.mark.ray
@pytest.mark.slow  # ~2 s each
def test_the_api_connect_ends_within_the_budget(idle_listener, tmp_path) -> None:
    """fuseview.profile/tune(..., budget=2) on an idle listener: 2 s, not the 5 s probe of the 30 s cap."""
    pytest.importorskip("ray")  # imported before the clock starts
    import fuseview

    spec = f"ray:127.0.0.1:{idle_listener}"
    line = _ends_within(lambda: fuseview.profile(MLP, against=MLP, target=spec, budget=2), 2)
    assert "gave no answer" in line and f"127.0.0.1:{idle_listener}" in line, line
    line = _ends_within(lambda: fuseview.tune(MLP, target=spec, budget=2), 2)
    assert "gave no answer" in line, line


@pytest.mark.ray
@pytest.mark.slow  # ~2 s
def test_the_windows_profile_on_a_ray_target_ends_within_the_budget(idle_listener) -> None:
    """The Profile dock's run (Session.profile) with a budget: its connect bounded as the CLI's."""
    pytest.importorskip("ray")
    from fuseview.runtime.job import ProfileRequest
    from fuseview.session import Session

    s = Session()
    failures: list[BaseException] = []
    s.events.profile_failed.connect(lambda e: failures.append(e.error))
    t0 = time.monotonic()
    job = s.profile(ProfileRequest(model=str(MLP), against=str(MLP), budget_s=2),
                    f"ray:127.0.0.1:{idle_listener}")
    assert job.wait(60), "the profile job did not end"
    took = time.monotonic() - t0
    assert len(failures) == 1 and "gave no answer" in str(failures[0]), failures
    assert took < 2 + 1.5, took
