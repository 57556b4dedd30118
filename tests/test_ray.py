"""profile, tune and sweep against a REAL local Ray cluster (`ray start --head` on 127.0.0.1 with its own
temp dir, one CPU, stopped after): verdicts agree with local runs, reports say which node measured them,
and an unreachable cluster, a killed worker or an exceeded budget end in one line, exit 2, nothing written.

Skipped without ray (the [ray] extra) unless FUSEVIEW_REQUIRE_RAY=1, which makes a missing ray a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest

from fuseview.cli import main
from fuseview.tuning.settings import TuneSettings
from fuseview.workflows.tune import tune

from .conftest import ASSET_MODELS, ROOT
from .test_tune import FAST, GPT2_PAST, MLP, slow_gelu_rule
from .test_ui_workbench import win  # noqa: F401 - the window fixture

pytestmark = [pytest.mark.ray, pytest.mark.slow]
CONV = ASSET_MODELS / "convnet_bn_relu_ts17.onnx"
TANH = ASSET_MODELS / "mlp_gelu_tanh_ts17.onnx"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_exe() -> str:
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("FUSEVIEW_REQUIRE_RAY") == "1":
            pytest.fail("FUSEVIEW_REQUIRE_RAY=1 but ray is not installed (pip install -e '.[test,ray]')")
        pytest.skip("ray is not installed (the [ray] extra)")
    exe = shutil.which("ray", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if exe is None:
        pytest.fail("ray is importable but its `ray` command is not on PATH")
    return exe


def _session_members(sid: int) -> list[int]:
    """The processes of session `sid` (Ray's workers get process groups of their own, not sessions)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[3]) == sid:
                out.append(int(d.name))
    return out


def _client_server_args() -> list[str]:
    """A free port for the Ray Client server when ray[client] is installed (else `ray start` refuses the
    flag: a plain `pip install ray`, as the [ray] extra makes, starts no client server)."""
    try:
        from ray._private.utils import get_ray_client_dependency_error
    except ImportError:
        return []
    return [] if get_ray_client_dependency_error() is not None else ["--ray-client-server-port",
                                                                      str(_free_port())]


@contextlib.contextmanager
def ray_head(env: dict[str, str], prefix: str) -> Iterator[dict]:
    """A one-node Ray head on 127.0.0.1 started with env; every process it starts is in one session (`ray
    start` is its leader), whose processes are ended by id afterwards (other Ray clusters are left alone).
    Yields {address, sid, temp}."""
    exe = _ray_exe()
    port = _free_port()
    temp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env = {k: v for k, v in env.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen(
        [exe, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
         *_client_server_args(), "--temp-dir", temp, "--num-cpus", "1",
         "--object-store-memory", str(100 << 20), "--include-dashboard=false", "--disable-usage-stats"],
        env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sid = proc.pid
    try:
        out, _ = proc.communicate(timeout=180)
        if proc.returncode != 0:
            pytest.fail(f"ray start failed: {out[-2000:]}")
        yield {"address": f"127.0.0.1:{port}", "sid": sid, "temp": temp}
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in _session_members(sid):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            for _ in range(12):  # 3 s for a clean exit; SIGKILL then
                if not _session_members(sid):
                    break
                time.sleep(0.25)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster():
    """A one-node Ray cluster of this machine (ray_head), this checkout on its workers' path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                                       if p)}
    with ray_head(env, "fvray-") as head:
        try:
            yield head
        finally:
            import ray

            ray.shutdown()


@pytest.fixture(scope="module")
def slow_pair(tmp_path_factory) -> tuple[Path, Path]:
    """The committed MLP and the same model with identity MatMuls after each GELU: clearly more work."""
    from fuseview.fusion.apply import apply_candidates
    from fuseview.fusion.scan import scan_model

    base = onnx.load(str(MLP))
    scan = scan_model(base, {}, [slow_gelu_rule()])
    slow = tmp_path_factory.mktemp("pair") / "mlp_slow.onnx"
    onnx.save(apply_candidates(base, scan, [c.id for c in scan.candidates]).model, slow)
    return MLP, slow


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("fuseview: error: "), err
    return err


def test_profile_on_the_cluster_agrees_with_a_local_profile(ray_cluster, slow_pair, tmp_path, capsys):
    fast, slow = slow_pair
    reports = {}
    for target in ("local", f"ray:{ray_cluster['address']}"):
        out = tmp_path / f"{target.split(':')[0]}.json"
        # 8 sessions: the interval spans the sessions' speeds, and 3 leave it wide on a loaded machine
        rc = main(["profile", str(fast), "--against", str(slow), "--runs", "80", "--sessions", "8",
                   "--ort-opt", "disabled", "--threads", "1", "--target", target, "--json", str(out),
                   "--quiet"])
        assert rc == 0
        reports[target.split(":")[0]] = json.loads(out.read_text())
    capsys.readouterr()
    verdicts = {k: r["comparison"]["latency"]["verdict"] for k, r in reports.items()}
    assert verdicts["ray"] == verdicts["local"] == "slower", verdicts  # --against is the slower one
    env = reports["ray"]["environment"]
    import ray

    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert env["target"]["kind"] == "ray" and env["target"]["address"] == ray_cluster["address"]
    assert env["target"]["node_id"] in alive and env["target"]["hostname"] == socket.gethostname()
    assert env["cpu_cores"] >= 1 and env["memory_bytes"] > 0 and env["onnxruntime"]
    assert reports["local"]["environment"]["target"] == {"kind": "local"}
    assert [m["path"] for m in reports["ray"]["models"]] == [str(fast), str(slow)]  # this machine's paths


def test_tune_on_the_cluster_rejects_the_slower_fusion_as_a_local_tune_does(ray_cluster):
    from fuseview.targets import open_target

    settings = dict(budget_s=60, **{**FAST, "max_batches": 3})
    local = tune(MLP, TuneSettings(**settings), rules=[slow_gelu_rule()]).report
    target = open_target(f"ray:{ray_cluster['address']}", "cpu")
    remote = tune(MLP, TuneSettings(**settings), target, rules=[slow_gelu_rule()]).report
    for rep in (local, remote):
        assert all(d.decision == "reject" for d in rep.decisions) and rep.final.chosen == "original"
        assert rep.groups[0].effect.verdict == "slower"
    assert target.environment()["target"]["node_id"] == target.node_id
    assert target.tasks >= remote.measurements > 0  # every A/B of the remote tune was a task on the node


def test_tune_cli_on_the_cluster_writes_the_node_into_the_report(ray_cluster, tmp_path, capsys):
    out, rep = tmp_path / "t.onnx", tmp_path / "t.json"
    rc = main(["tune", str(CONV), "-o", str(out), "--json", str(rep), "--budget", "15", "--runs", "8",
               "--sessions", "2", "--threads", "1", "--seeds", "1",
               "--target", f"ray:{ray_cluster['address']}", "--quiet"])
    capsys.readouterr()
    assert rc == 0 and out.is_file()
    env = json.loads(rep.read_text())["environment"]
    assert env["target"]["kind"] == "ray" and env["target"]["hostname"] == env["hostname"]


def test_a_sweep_of_three_models_on_the_cluster_then_resumed(ray_cluster, tmp_path, capsys):
    out = tmp_path / "sweep"
    out.mkdir()
    argv = ["sweep", str(MLP), str(TANH), str(CONV), "-o", str(out), "--budget", "8", "--runs", "8",
            "--sessions", "2", "--threads", "1", "--target", f"ray:{ray_cluster['address']}", "--quiet"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    items = json.loads((out / "sweep.json").read_text())["items"]
    names = [Path(p).stem for p in (MLP, TANH, CONV)]
    assert [r["item"] for r in items] == names
    for r in items:
        assert r["status"] == "tuned" and r["node"] == socket.gethostname() and r["chosen"], r
        assert (out / f"{r['item']}.onnx").is_file() and r["item"] in table
        rep = json.loads((out / f"{r['item']}.tune.json").read_text())
        assert rep["environment"]["target"]["kind"] == "ray"
        onnx.checker.check_model(str(out / f"{r['item']}.onnx"))
    assert (out / "sweep.txt").read_text().splitlines()[0].startswith("item")
    assert main(argv) == 0  # every report is there: nothing runs again
    capsys.readouterr()
    assert all(r["status"] == "done before" for r in json.loads((out / "sweep.json").read_text())["items"])


def test_a_kv_cache_decoder_is_tuned_at_the_same_dims_here_and_on_the_cluster(ray_cluster, tmp_path, capsys):
    """One tune recipe and one decode-step rule: a local tune, a tune whose A/Bs run on the node, and a sweep
    item tuned on the node (a proto there) and locally all measure the decoder at its decode step."""
    ray = f"ray:{ray_cluster['address']}"
    settings = dict(budget_s=8, **{**FAST, "runs": 8, "sessions": 2, "max_batches": 1})
    local = tune(GPT2_PAST, TuneSettings(**settings)).report.to_json()
    remote = tune(GPT2_PAST, TuneSettings(**settings), ray).report.to_json()
    swept = {}
    for where in ("local", ray):
        out = tmp_path / where.replace(":", "_")
        out.mkdir()
        assert main(["sweep", str(GPT2_PAST), "-o", str(out), "--budget", "8", "--runs", "8", "--sessions",
                     "2", "--threads", "1", "--target", where, "--quiet"]) == 0
        swept[where] = json.loads((out / f"{GPT2_PAST.stem}.tune.json").read_text())
    capsys.readouterr()
    decode = {"sequence": 1, "total_sequence": 256, "past_sequence": 255}  # 256 capped by wpe's 256
    for rep in (local, remote, swept["local"], swept[ray]):
        assert rep["config"]["dims"] == decode and rep["notes"][0] == local["notes"][0]
    assert "decode step" in local["notes"][0]
    assert remote["environment"]["target"]["kind"] == swept[ray]["environment"]["target"]["kind"] == "ray"


def test_an_unreachable_cluster_is_one_line_and_exit_2(ray_cluster, tmp_path, capsys):
    out = tmp_path / "r.json"
    t0 = time.monotonic()
    rc = main(["profile", str(MLP), "--target", f"ray:127.0.0.1:{_free_port()}", "--json", str(out),
               "--quiet"])
    err = _one_line_error(capsys)
    assert rc == 2 and "cannot reach the Ray cluster" in err and not out.exists()
    assert time.monotonic() - t0 < 30


def _task_worker(sid: int, name: str, timeout: float = 60) -> int | None:
    """The pid of the cluster's worker process running the task `name` (its title is ray::name)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for pid in _session_members(sid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if cmd.startswith(f"ray::{name}".encode()):
                return pid
        time.sleep(0.2)
    return None


def test_a_killed_worker_is_one_line_exit_2_and_nothing_written(ray_cluster, slow_pair, tmp_path, capsys):
    fast, slow = slow_pair
    out = tmp_path / "r.json"
    killed: list[int] = []

    def kill_the_worker() -> None:
        pid = _task_worker(ray_cluster["sid"], "_profile_task")
        if pid is not None:
            time.sleep(1.0)  # mid-run
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    rc = main(["profile", str(fast), "--against", str(slow), "--runs", "100000", "--threads", "1",
               "--budget", "90", "--target", f"ray:{ray_cluster['address']}", "--json", str(out), "--quiet"])
    killer.join()
    err = _one_line_error(capsys)
    assert killed, "no worker ran the profile task"
    assert rc == 2 and "lost" in err and not out.exists(), err


def test_a_task_over_its_budget_is_cancelled_one_line_exit_2(ray_cluster, slow_pair, tmp_path, capsys):
    _fast, slow = slow_pair
    out = tmp_path / "r.json"
    # one model: --budget bounds the task (with --against it bounds the A/B, the task at 2 x it + 60 s)
    rc = main(["profile", str(slow), "--runs", "100000", "--threads", "1",
               "--budget", "3", "--target", f"ray:{ray_cluster['address']}", "--json", str(out), "--quiet"])
    err = _one_line_error(capsys)
    assert rc == 2 and "exceeded the budget of 3 s" in err and not out.exists(), err


def test_the_profile_dock_runs_on_the_cluster_and_shows_the_node(ray_cluster, qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from fuseview.ui.profile_panel import ProfilePanel
    from fuseview.ui.target_selector import TargetSelector

    panel = ProfilePanel()
    qtbot.addWidget(panel)
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    panel.target.settings = settings  # not the user's settings
    spec = f"ray:{ray_cluster['address']}"
    panel.target.combo.setCurrentText(spec)
    panel.set_models(str(MLP), None)
    panel.runs.setValue(5)
    with qtbot.waitSignal(panel.profileFinished, timeout=180_000) as finished:
        panel.start_profile()
    report = finished.args[0]
    assert report["environment"]["target"]["kind"] == "ray"
    assert panel.target.where.text().startswith(f"measured on Ray node {socket.gethostname()}")
    assert settings.value("targets/last") == spec  # remembered for the next run
    assert TargetSelector(settings=settings).spec() == spec


def test_a_worker_killed_during_a_tune_ends_it_with_one_line_and_nothing_written(ray_cluster, tmp_path,
                                                                                 capsys):
    out, rep = tmp_path / "t.onnx", tmp_path / "t.json"
    killed: list[int] = []

    def kill_an_ab() -> None:
        pid = _task_worker(ray_cluster["sid"], "_measure_task")
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill_an_ab)
    killer.start()
    rc = main(["tune", str(TANH), "-o", str(out), "--json", str(rep), "--budget", "60", "--runs", "400",
               "--sessions", "4", "--threads", "1", "--target", f"ray:{ray_cluster['address']}", "--quiet"])
    killer.join()
    err = _one_line_error(capsys)
    assert killed, "no worker ran an A/B"
    assert rc == 2 and "lost" in err and not out.exists() and not rep.exists(), err


def test_the_windows_tune_runs_its_abs_on_the_cluster_and_names_the_node(ray_cluster, qtbot, win):  # noqa: F811
    from .test_ui_workbench import open_scanned

    open_scanned(qtbot, win, MLP)
    wb = win.workbench
    settings = TuneSettings(threads=1, runs=10, sessions=2, max_batches=1, warmup=1, seeds=1,
                            ort_optimizer="off", budget_s=30)
    with qtbot.waitSignal(wb.tuner.finished, timeout=180_000) as finished:
        assert wb.tuner.start(settings, f"ray:{ray_cluster['address']}") is not None
    env = finished.args[0].report.environment
    assert env["target"]["kind"] == "ray" and env["target"]["address"] == ray_cluster["address"]
    assert f"measured on Ray node {socket.gethostname()}" in win.statusBar().currentMessage()


@pytest.mark.ray
def test_a_killed_worker_leaves_no_ray_line(ray_cluster, slow_pair, tmp_path) -> None:
    # the round found up to 44 lines of a killed worker or raylet on stdout; the report and one error line
    # are all fuseview may print (here at the file-descriptor level, where Ray's C++ core writes)
    from .test_ray_auth import _fuseview

    fast, slow = slow_pair
    killed: list[int] = []

    def kill_the_worker() -> None:
        pid = _task_worker(ray_cluster["sid"], "_profile_task")
        if pid is not None:
            time.sleep(1.0)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill_the_worker)
    killer.start()
    run, _ = _fuseview(["profile", str(fast), "--against", str(slow), "--runs", "100000", "--threads", "1",
                        "--budget", "90", "--target", f"ray:{ray_cluster['address']}", "--quiet"],
                       tmp_path, {}, timeout=200)
    killer.join()
    assert killed, "no worker ran the profile task"
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and "lost" in lines[0], run.stderr[-2000:]
    assert run.stdout.strip() == "", run.stdout[-2000:]
