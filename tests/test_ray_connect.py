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
