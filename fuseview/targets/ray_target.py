"""Measurements on one node of a Ray cluster: fuseview's only Ray code (imported only for a ray: target).

Each measurement is a Ray task pinned to one node (NodeAffinitySchedulingStrategy, not soft), so every A/B
of a profile or a tune runs on the same machine, its models interleaved there as they are here. The models
travel as packed graphs plus their weight files (put in the object store once per file and run). A task is
never retried (max_retries=0): a worker or node lost mid-run ends the run with one line, as does a task that
outlives its budget (it is cancelled on the node).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from fuseview.errors import Cancelled, FuseviewError, user_error_message
from fuseview.progress import StepProgress
from fuseview.runtime.job import ProfileRequest, run_profile
from fuseview.runtime.profiling import Cancel, check_cancel
from fuseview.runtime.runner import (
    MeasureRequest,
    MeasureResult,
    PackedModel,
    TargetError,
    fingerprint,
    pack_model,
    unpack_model,
)
from fuseview.targets.base import JSON, TuneItem, TuneOutcome, TuneWork
from fuseview.targets.local import LocalTarget
from fuseview.targets.stamp import stamp_profile, where
from fuseview.textsafe import one_line

PROBE_TIMEOUT_S = 5.0  # a cluster that does not answer a TCP connect in this long is unreachable
FINGERPRINT_TIMEOUT_S = 120.0
RAY_INIT_TIMEOUT_S = 20.0  # ray.init itself has no time limit; with the probes, a failure within 30 s
CONNECT_LIMIT_S = 2 * PROBE_TIMEOUT_S + RAY_INIT_TIMEOUT_S  # the probes and ray.init; a budget bounds it too
# what Ray's client says when the GCS refuses it for want of a token
_TOKEN_SIGNS = re.compile(r"Unauthenticated|InvalidAuthToken|auth(entication)? token", re.IGNORECASE)
_LOG = logging.getLogger("fuseview.ray")
_CONNECTED: list[str] = []  # the address this process's Ray connection was made to
_CONNECTING = threading.Lock()  # the window's profile and tune jobs may connect from two threads


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise FuseviewError("--target ray: Ray is not installed; pip install 'fuseview[ray]'") from None
    return ray


def _host_port(address: str) -> tuple[str, int] | None:
    """(host, port) of HOST:PORT or ray://HOST:PORT; None for auto and other forms ray.init resolves."""
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


# an HTTP/2 client preface and an empty SETTINGS frame: a Ray head (GCS and Ray Client servers speak gRPC)
# answers with a SETTINGS frame of its own; an idle listener or an HTTP/1 server never does
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _left(deadline: float, cap: float) -> float:
    """Seconds to wait for one step: its cap, or less when the connect's deadline comes first."""
    return max(0.0, min(cap, deadline - time.monotonic()))


def _probe(address: str, deadline: float) -> None:
    """TargetError unless the address answers a TCP connect and speaks gRPC's HTTP/2 within
    PROBE_TIMEOUT_S each, and by the deadline (ray.init has no time limit: it waits forever on a listener
    that is not a Ray head)."""
    hp = _host_port(address)
    if hp is None:
        return
    try:
        sock = socket.create_connection(hp, timeout=max(0.01, _left(deadline, PROBE_TIMEOUT_S)))
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise TargetError(f"cannot reach the Ray cluster at {address}: {why}") from None
    with sock:
        head = b""
        waited = _left(deadline, PROBE_TIMEOUT_S)
        end = time.monotonic() + waited
        try:
            sock.sendall(_H2_PREFACE)
            while len(head) < 9 and time.monotonic() < end:
                sock.settimeout(max(0.01, end - time.monotonic()))
                more = sock.recv(9 - len(head))
                if not more:
                    break
                head += more
        except OSError:
            pass
    if len(head) < 9 or head[3] != 4:  # frame type 4: SETTINGS
        said = "no answer" if not head else f"an answer that is not gRPC ({head[:9]!r})"
        raise TargetError(f"{address} is not a Ray head: it accepts a TCP connection but gave {said} within"
                          f" {_secs(waited)} (start one with `ray start --head` and pass its GCS"
                          " address, e.g. ray:127.0.0.1:6379)")


def _secs(s: float) -> str:
    return f"{s:.3g} s"


def _connect(address: str, limit_s: float) -> Any:
    deadline = time.monotonic() + limit_s
    with _CONNECTING:
        return _connect_once(address, deadline)


def _connect_once(address: str, deadline: float) -> Any:
    ray = _ray()
    if ray.is_initialized():
        if _CONNECTED and _CONNECTED[0] == address:
            return ray
        ray.shutdown()
        _CONNECTED.clear()
    _probe(address, deadline)
    _quiet_driver_prints()
    failure, said = _init_quietly(ray, address, _left(deadline, RAY_INIT_TIMEOUT_S))
    if failure is not None:
        why = one_line(failure)[:300]
        if _TOKEN_SIGNS.search(said + failure) and os.environ.get("RAY_AUTH_MODE") != "token":
            why = ("the cluster uses token authentication: set RAY_AUTH_MODE=token and its token"
                   " (RAY_AUTH_TOKEN, or RAY_AUTH_TOKEN_PATH)")
        raise TargetError(f"cannot connect to the Ray cluster at {address}: {why}")
    _CONNECTED.append(address)
    return ray


def _quiet_driver_prints() -> None:
    """Ray's driver prints what the cluster publishes (a killed worker: "(raylet) A worker died ...", up to
    44 lines) on stdout from a thread of its own; fuseview says a lost worker in its one line, so those go
    to the debug log. Ray offers no switch for it (log_to_driver covers the workers' own output only)."""
    import ray._private.worker as ray_worker

    if hasattr(ray_worker, "print_to_stdstream"):
        ray_worker.print_to_stdstream = _to_debug_log


def _to_debug_log(data: dict[str, Any], ignore_prefix: bool = False) -> None:
    for line in data.get("lines", ()):
        _LOG.debug("ray %s: %s", data.get("pid"), line)


def _init_quietly(ray: Any, address: str, timeout_s: float) -> tuple[str | None, str]:
    """Run ray.init for at most timeout_s with the process's stderr (where Ray's C++ core writes its
    retries, 6 to 22 lines) and stdout sent to a file; (the failure or None, what Ray wrote there)."""
    result: list[BaseException | None] = []

    def init() -> None:
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
            result.append(None)
        except BaseException as exc:  # noqa: BLE001 - ConnectionError, RuntimeError, version mismatches
            result.append(exc)

    with tempfile.TemporaryFile() as sink:
        saved = [os.dup(1), os.dup(2)]
        try:
            for fd in (1, 2):
                os.dup2(sink.fileno(), fd)
            worker = threading.Thread(target=init, daemon=True, name="fuseview-ray-init")
            worker.start()
            worker.join(timeout_s)
        finally:
            for fd, old in zip((1, 2), saved, strict=True):
                os.dup2(old, fd)
                os.close(old)
        sink.seek(0)
        said = sink.read(1 << 20).decode("utf-8", "replace")
    if not result:
        return (f"no Ray session within {_secs(timeout_s)} (the address answers gRPC but is not a"
                " Ray GCS that accepts this client)"), said
    exc = result[0]
    return (None if exc is None else (str(exc) or type(exc).__name__)), said


def _pick_node(ray: Any, provider: str) -> tuple[JSON, int]:
    """(node, GPUs per task): the first alive node (by id) with a GPU for cuda (auto prefers one), else
    with a CPU."""
    nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeID"])
    gpu = [n for n in nodes if n.get("Resources", {}).get("GPU", 0) >= 1]
    cpu = [n for n in nodes if n.get("Resources", {}).get("CPU", 0) >= 1]
    if provider == "cuda" and not gpu:
        raise TargetError("--provider cuda: no alive node of the Ray cluster has a GPU")
    if provider != "cpu" and gpu:
        return gpu[0], 1
    if not cpu:
        raise TargetError("no alive node of the Ray cluster has a CPU to run on")
    return cpu[0], 0


def _resolved(p: PackedModel) -> PackedModel:
    """The packed model with its weight files' object refs fetched (on the node)."""
    ray = _ray()
    keys = list(p.files)
    values = ray.get([p.files[k] for k in keys]) if keys else []
    return PackedModel(p.graph, dict(zip(keys, values, strict=True)))


def _node_facts() -> JSON:
    ray = _ray()
    return {**fingerprint(), "node_id": ray.get_runtime_context().get_node_id()}


# ------------------------------------------------------------------ the functions that run on the node
def _fingerprint_task() -> JSON:
    return _node_facts()


def _measure_task(request: MeasureRequest) -> MeasureResult:
    models = [_resolved(m) if isinstance(m, PackedModel) else m for m in request.models]
    res = LocalTarget().measure(dataclasses.replace(request, models=models))
    res.environment = _node_facts()
    return res


def _profile_task(fields: JSON, packs: list[PackedModel], inputs: bytes | None) -> JSON:
    with tempfile.TemporaryDirectory(prefix="fuseview-ray-") as tmp:
        protos = []
        for i, p in enumerate(packs):
            folder = Path(tmp) / f"m{i}"
            folder.mkdir()
            protos.append(unpack_model(_resolved(p), folder))
        if inputs is not None:
            npz = Path(tmp) / "inputs.npz"
            npz.write_bytes(inputs)
            fields = {**fields, "inputs_npz": str(npz)}
        req = ProfileRequest(model=protos[0], against=protos[1] if len(protos) > 1 else None, **fields)
        return {"report": run_profile(req), "facts": _node_facts()}  # stamped by the driver


def _tune_task(pack: PackedModel, settings: JSON, name: str, work: TuneWork) -> JSON:
    with tempfile.TemporaryDirectory(prefix="fuseview-ray-") as tmp:
        folder = Path(tmp) / "model"
        folder.mkdir()
        model = unpack_model(_resolved(pack), folder)
        out = Path(tmp) / "out"
        out.mkdir()
        done = work(model, settings, out, name)  # the one tune recipe (workflows.tune.tune_item), here too
        done["files"] = {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()}
    done["environment"] = _node_facts()
    return done


def task_deadline(per_item_s: float, items: int, slots: int) -> float:
    """Seconds all items may take when `slots` run at once and each may take per_item_s."""
    return per_item_s * math.ceil(items / max(1, slots))


# ------------------------------------------------------------------ the driver's side
class RayTarget(LocalTarget):
    """One node of a Ray cluster; every measurement a task pinned to it."""

    kind = "ray"

    def __init__(self, address: str, node_id: str, hostname: str, gpus: int) -> None:
        self.address, self.node_id, self.hostname, self.gpus = address, node_id, hostname, gpus
        self.budget_s: float | None = None  # a bound on each task when the request gives none
        self.facts: JSON = {}
        # (path, size, mtime) -> object ref of the file's bytes
        self._files: dict[tuple[str, int, int], Any] = {}
        self.tasks = 0  # measurement tasks run on the node

    @classmethod
    def connect(cls, address: str, provider: str = "auto", limit_s: float | None = None) -> RayTarget:
        """Connect to the cluster, choose the node and read its fingerprint (TargetError when unreachable);
        the connect fails within limit_s (a budget) or CONNECT_LIMIT_S, whichever is less."""
        ray = _connect(address, CONNECT_LIMIT_S if limit_s is None else min(limit_s, CONNECT_LIMIT_S))
        try:
            node, gpus = _pick_node(ray, provider)
        except TargetError:
            raise
        except Exception as exc:  # noqa: BLE001 - a Ray client error while listing nodes
            raise TargetError(f"the Ray cluster at {address}: {one_line(str(exc))[:300]}") from None
        target = cls(address, node["NodeID"], node.get("NodeManagerHostname") or node["NodeManagerAddress"],
                     gpus)
        target.facts = target._wait(target._task(_fingerprint_task).remote(), FINGERPRINT_TIMEOUT_S, None,
                                    "reading the node's fingerprint")
        target.hostname = target.facts.get("hostname") or target.hostname
        return target

    def describe(self) -> JSON:
        """environment.target of the reports measured on this node."""
        return {"kind": "ray", "address": self.address, "node_id": self.node_id, "hostname": self.hostname}

    def environment(self) -> JSON:
        """The node's fingerprint with the target."""
        return where(self.facts, self.describe())

    # -------------------------------------------------------------- tasks
    def _task(self, fn: Callable[..., Any], cpus: float = 1) -> Any:
        ray = _ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return ray.remote(fn).options(
            num_cpus=cpus, num_gpus=self.gpus, max_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_id, soft=False))

    def _wait(self, ref: Any, budget_s: float | None, cancel: Cancel, what: str) -> Any:
        """The task's result; Cancelled, or TargetError for a lost node or an exceeded budget."""
        ray = _ray()
        end = None if budget_s is None else time.monotonic() + budget_s
        while not ray.wait([ref], timeout=0.25)[0]:
            try:
                check_cancel(cancel)
            except Cancelled:
                ray.cancel(ref, force=True)
                raise
            if end is not None and time.monotonic() > end:
                ray.cancel(ref, force=True)
                raise TargetError(f"{what} on Ray node {self.hostname} exceeded the budget of {budget_s:g} s"
                                  " (the task was cancelled)")
        return self._result(ref, what)

    def _result(self, ref: Any, what: str) -> Any:
        ray = _ray()
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, (FuseviewError, TargetError)):
                raise cause from None
            message = user_error_message(cause) if isinstance(cause, BaseException) else None
            if message is not None:
                raise FuseviewError(message) from None
            text = one_line(str(cause if cause is not None else exc))[:300]
            raise TargetError(f"{what} failed on Ray node {self.hostname}: {text}") from None
        except ray.exceptions.RayError as exc:  # worker crashed, node died, object lost, unschedulable
            first = one_line(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            raise TargetError(f"{what}: the Ray node {self.hostname} was lost"
                              f" ({type(exc).__name__}: {first[:200]})") from None

    def _put(self, path: Path) -> Any:
        st = path.stat()
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in self._files:
            from fuseview.safe_io import read_bytes

            self._files[key] = _ray().put(read_bytes(path, "model", "weights"))
        return self._files[key]

    def ship(self, source: Any, base_dir: str | os.PathLike[str] | None = None) -> PackedModel:
        """The model packed for the node, its weight files in the object store (each put once)."""
        graph, files = pack_model(source, base_dir)
        return PackedModel(graph, {k: self._put(p) for k, p in files.items()})

    # -------------------------------------------------------------- the runner contract
    def measure(self, request: MeasureRequest, progress: StepProgress | None = None,
                cancel: Cancel = None) -> MeasureResult:
        """The request run on the node as one task (both models' sessions interleaved there)."""
        models = [m if isinstance(m, PackedModel) else self.ship(m, request.base_dir) for m in request.models]
        shipped = dataclasses.replace(request, models=models, base_dir=None)
        if progress:
            progress(f"A/B on {self.hostname}", 0, 1)
        budget = request.budget_s if request.budget_s is not None else self.budget_s
        self.tasks += 1
        res: MeasureResult = self._wait(self._task(_measure_task).remote(shipped), budget, cancel, "an A/B")
        if progress:
            progress(f"A/B on {self.hostname}", 1, 1)
        return res

    def profile(self, request: ProfileRequest, progress: StepProgress | None = None, cancel: Cancel = None
                ) -> JSON:
        """run_profile on the node; the report's paths are this machine's, its environment the node's."""
        paths = [request.model, request.against]
        packs = [self.ship(m) for m in paths if m is not None]
        fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)
                  if f.name not in ("model", "against", "inputs_npz")}
        inputs = None
        if request.inputs_npz:
            from fuseview.safe_io import read_bytes

            inputs = read_bytes(request.inputs_npz, "inputs")
        if progress:
            progress(f"profile on {self.hostname}", 0, 1)
        task = self._task(_profile_task).remote(fields, packs, inputs)
        done: JSON = self._wait(task, self.budget_s, cancel, "the profile")
        report: JSON = done["report"]
        if progress:
            progress(f"profile on {self.hostname}", 1, 1)
        by_role = {"model": request.model, "against": request.against}
        for m in report["models"]:
            path = by_role.get(m["role"])
            m["path"] = str(path) if isinstance(path, (str, os.PathLike)) else None
        if request.inputs_npz:
            report["inputs"]["source"] = str(request.inputs_npz)
        return stamp_profile(report, where(done["facts"], self.describe()))

    def tune_many(self, items: Sequence[TuneItem], work: TuneWork, folder: Path, per_item_s: float | None,
                  cancel: Cancel = None) -> Iterator[TuneOutcome]:
        """Tune every (name, model path, settings) as parallel tasks on any node with room; yields (name,
        the task's result, its environment the node it ran on, or its TargetError/FuseviewError) as they
        finish. per_item_s bounds each task, counted as if as many ran at once as the cluster has CPUs
        (GPUs for CUDA). The models come back as "files" (folder is this machine's)."""
        ray = _ray()
        fn = ray.remote(_tune_task).options(num_cpus=1, num_gpus=self.gpus, max_retries=0)
        pending = {fn.remote(self.ship(path), settings, name, work): name for name, path, settings in items}
        end = None
        if per_item_s is not None:
            slots = int(ray.cluster_resources().get("GPU" if self.gpus else "CPU", 1))
            end = time.monotonic() + task_deadline(per_item_s, len(pending), slots)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.25)
            if not ready:
                try:
                    check_cancel(cancel)
                except Cancelled:
                    for ref in pending:
                        ray.cancel(ref, force=True)
                    raise
                if end is not None and time.monotonic() > end:
                    for ref, name in pending.items():
                        ray.cancel(ref, force=True)
                        yield name, TargetError(f"over the budget of {per_item_s:g} s per item (cancelled)")
                    return
                continue
            ref = ready[0]
            name = pending.pop(ref)
            try:
                yield name, self._stamped(self._result(ref, f"tuning {name}"))
            except (TargetError, FuseviewError) as exc:
                yield name, exc

    def _stamped(self, done: JSON) -> JSON:
        """A task's result with the environment of the node it ran on (any node of the cluster)."""
        env = done.get("environment")
        if not isinstance(env, dict):
            raise TargetError("a tune task returned no environment")
        target = {**self.describe(), "node_id": env.get("node_id"), "hostname": env.get("hostname")}
        return {**done, "environment": where(env, target)}
