"""A profile as a job: the request goes whole to the profile child process, its progress comes back.

The job function for the session's job service (kind 'profile'); Cancel kills the child at once. In-memory
models (the fused one after Apply) are written to a temporary folder first; nothing is left behind.
No Qt here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

import onnx

from fuseview.errors import Cancelled, FuseviewError, error_text
from fuseview.graph.lazy_weights import has_disk_weights
from fuseview.graph.save import save_model_atomic
from fuseview.reports import ProfileReport
from fuseview.runtime.job import ProfileRequest
from fuseview.runtime.sessions import ModelSource
from fuseview.session.jobs import Progress
from fuseview.session.profile_child import MODULE, child_input

# over protobuf's 2 GiB a model's weights go beside it
_EXTERNAL_ABOVE = 1_800_000_000
_STDERR_LINES = 20


def model_files(models: dict[str, ModelSource | None], folder: str) -> dict[str, str | None]:
    """Paths for the child process: in-memory models written to folder, paths as they are."""
    out: dict[str, str | None] = {}
    for key, m in models.items():
        if isinstance(m, onnx.ModelProto):
            out[key] = path = os.path.join(folder, f"{key}.onnx")
            if has_disk_weights(m):  # weights left in the source (folder recorded): streamed, not held
                save_model_atomic(m, path)
            elif m.ByteSize() > _EXTERNAL_ABOVE:
                copy = onnx.ModelProto()
                copy.CopyFrom(m)  # saving with external data rewrites the proto it is given
                onnx.save_model(copy, path, save_as_external_data=True)
            else:
                onnx.save_model(m, path)
        else:
            out[key] = None if m is None else str(m)
    return out


def profile_steps(req: ProfileRequest) -> int:
    """How many progress steps the child reports: interleaved plain runs, each model's profiled runs,
    and the comparison."""
    n_models = 2 if req.against is not None else 1
    profiled = n_models * (req.warmup + req.profiled_runs())
    return req.warmup + req.runs + profiled + 2 * (n_models - 1)


class _StepCount:
    """Steps of the stages already finished plus this stage's (each stage ends with done == total)."""

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.finished = 0

    def fraction(self, done: int, total: int) -> float:
        if done == total:
            self.finished += total
            return min(self.finished / self.total, 1.0)
        return min((self.finished + done) / self.total, 1.0)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the child imports this same fuseview
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def profile_in_child(req: ProfileRequest, progress: Progress) -> dict[str, Any]:
    """Run req in the profile child process; returns the report dict (FuseviewError with its message)."""
    tmp = tempfile.mkdtemp(prefix="fuseview-profile-")
    try:
        return _run(req, progress, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(req: ProfileRequest, progress: Progress, tmp: str) -> dict[str, Any]:
    models = {"model": req.model, "against": req.against}
    written = {k for k, m in models.items() if isinstance(m, onnx.ModelProto)}
    progress("starting…", 0.0)
    try:
        paths = model_files(models, tmp)
    except Exception as exc:  # noqa: BLE001 - a full disk, a model protobuf cannot write
        raise FuseviewError(f"cannot write the model for profiling: {error_text(exc)}") from None
    out = os.path.join(tmp, "report.json")
    model_path = paths["model"]
    assert model_path is not None  # a ProfileRequest always has a model
    child_req = dataclasses.replace(req, model=model_path, against=paths["against"])
    try:
        proc = subprocess.Popen([sys.executable, "-m", MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=_child_env())
    except OSError:
        raise FuseviewError(f"cannot start the profiling process ({sys.executable})") from None
    stderr: list[str] = []
    drain = threading.Thread(target=_drain, args=(proc.stderr, stderr), daemon=True)
    drain.start()
    try:
        progress.on_cancel(proc.kill)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(child_input(child_req, out))
            proc.stdin.close()
        except OSError:
            pass  # the child died at once; its exit code and stderr say why
        child_error = _follow(proc.stdout, progress, _StepCount(profile_steps(req)))
        code = proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        drain.join(5)
    if progress.cancelled:
        raise Cancelled("cancelled")
    if code != 0:
        ended = stderr[-1] if stderr else f"the profiling process ended ({code})"
        raise FuseviewError(child_error or ended)
    report = ProfileReport.load(out).to_json()
    for m, key in zip(report["models"], ("model", "against"), strict=False):
        if key in written:
            m["path"] = None  # it was a temporary copy of an in-memory model
    return report


def _follow(stdout: IO[bytes], progress: Progress, steps: _StepCount) -> str | None:
    """Read the child's JSON lines until it closes stdout; returns its error message, if it sent one."""
    error = None
    for line in stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        if "error" in msg:
            error = str(msg["error"])
        elif "stage" in msg:
            done, total = msg["done"], msg["total"]
            progress(f"{msg['stage']} {done}/{total}", steps.fraction(done, total))
    return error


def _drain(stream: IO[bytes], lines: list[str]) -> None:
    for raw in stream:
        text = raw.decode("utf-8", "replace").strip()
        if text:
            lines.append(text)
            del lines[:-_STDERR_LINES]
