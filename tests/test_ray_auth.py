"""--target ray: against a cluster with token authentication and a gRPC server that is no Ray head (issue 38,
finding 2's rest): one line naming the cause, nothing of Ray's on fuseview's stdout or stderr, ray.init
bounded (RAY_INIT_TIMEOUT_S). A killed worker's lines: tests/test_ray.py (its cluster)."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import ASSET_MODELS, ROOT
from .test_ray import ray_head

MLP = ASSET_MODELS / "mlp_gelu_tanh_ts17.onnx"


def _fuseview(argv: list[str], home: Path, env: dict[str, str], timeout: float = 120):
    full = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(home), **env}
    for k in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        if k not in env:
            full.pop(k, None)
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "fuseview", *argv], capture_output=True, text=True,
                         timeout=timeout, env=full)
    return run, time.monotonic() - t0


@pytest.fixture()
def token_cluster(tmp_path) -> Iterator[dict]:
    """A one-node cluster started with RAY_AUTH_MODE=token (test_ray.ray_head)."""
    token = secrets.token_hex(32)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token, "HOME": str(tmp_path / "head")}
    with ray_head(env, "fvtok-") as head:
        yield {"address": head["address"], "token": token}


@pytest.mark.ray
@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_token_cluster_is_one_line_naming_token_authentication(token_cluster, tmp_path) -> None:
    home = tmp_path / "user"
    home.mkdir()
    argv = ["profile", str(MLP), "--target", f"ray:{token_cluster['address']}", "--runs", "4", "--quiet"]
    run, took = _fuseview([*argv, "--json", str(tmp_path / "r.json")], home, {})
    lines = run.stderr.strip().splitlines()
    # before: 6 to 22 lines of gcs_client.cc retries on stderr and "Failed to connect to Ray cluster"
    assert run.returncode == 2 and len(lines) == 1, run.stderr[-2000:]
    assert "token authentication" in lines[0] and "RAY_AUTH_MODE=token" in lines[0], lines[0]
    assert run.stdout == "" and took < 60 and not (tmp_path / "r.json").exists()
    assert not (home / ".ray").exists()
    run, _ = _fuseview([*argv, "--json", str(tmp_path / "r.json")], home,
                       {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token_cluster["token"]})
    assert run.returncode == 0 and run.stderr == "", run.stderr[-2000:]
    assert "gcs_client" not in run.stdout and "raylet" not in run.stdout and (tmp_path / "r.json").is_file()


@pytest.fixture()
def silent_grpc() -> Iterator[int]:
    """A listener that answers HTTP/2's SETTINGS (as a gRPC server does), then never anything else."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            held.append(conn)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    for c in held:
        c.close()
    srv.close()


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_ray_init_against_a_silent_grpc_server_ends_within_its_limit(silent_grpc, tmp_path) -> None:
    pytest.importorskip("ray")
    run, took = _fuseview(["profile", str(MLP), "--target", f"ray:127.0.0.1:{silent_grpc}", "--quiet"],
                          tmp_path, {}, timeout=150)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("fuseview: error: "), run.stderr
    assert run.stdout == "" and took < 45, (took, lines)  # 30 s and the start-up
