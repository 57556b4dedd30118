"""The device check of issue 35: on one H100/H200, in about 6 minutes, every stage with its own timeout.

Builds GPT-2 small, BERT-base and a Llama (8 x 768, grouped-query 12:4) at real width on the machine
(scripts/gpu_models.py: plain torch, seeded random weights, no transformers), fuses them (`fuseview fuse
--provider cuda`, float32; float16 through `fuse --float16` where this fuseview has it, else one line says
it is skipped), runs original / fused / onnxruntime's transformers optimizer on CUDA with inputs and
outputs bound on the device, and prints issue 35's table (fused ÷ original, optimizer ÷ original, fused ÷
optimizer, each the ratio of medians with its 95 % interval), then per model the placement, the device
time per node against the GPU busy time, the deployment-precision check, the device roofline, and
`fuseview tune --provider cuda` on the Llama, scripts/cuda_check.sh's sample fusions (a valid one passes, a
broken one must fail), then the float16 pairs profiled on the device (placement of the fp16-only fusions),
the window's Session on the Llama (provider auto, float16: what the window scans and applies on this
machine) and `tune --float16 --provider cuda` on the Llama; last, issue 35's "done means" criteria read off
the table and the profiles, each with its figure and met / NOT MET. The whole output goes to
OUT/gpu_check.log, the table to OUT/table.md, each profile to OUT/NAME[_fp16]_profile.json; the models stay
under --work (too big to return).

    python scripts/gpu_check.py --out DIR [--provider cuda|cpu] [--width real|tiny] [--budget 360]

Issue 35's stages fit 360 s; the float16 and Session stages run last and need about 480 (docs/gpu.md's call).

With --provider cpu --width tiny it runs anywhere in about a minute (tests/test_gpu_check.py).
How a call to the device machine is prepared: docs/gpu.md.

Requires: torch, onnx, onnxruntime, numpy
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODELS = ("gpt2", "bert", "llama")
ORT_TYPES = {"gpt2": "gpt2", "bert": "bert"}  # the optimizer has no Llama type
KEEP = ("placement:", "device time", "top nodes by device", " device ", "deployment precision",
        "fused max abs", "machine roofline", "verdict:", "outputs (", "fusion moved", "no device time")


class Check:
    """The stages, the deadline and the log."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.end = time.monotonic() + args.budget
        self.out, self.work = Path(args.out).resolve(), Path(args.work).resolve()
        self.out.mkdir(parents=True, exist_ok=True)
        (self.work / "models").mkdir(parents=True, exist_ok=True)
        self.log = (self.out / "gpu_check.log").open("a", encoding="utf-8")
        self.failed: list[str] = []

    def say(self, text: str = "") -> None:
        """One line on stdout and in the log."""
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def stage(self, name: str, cmd: list[str], timeout: float) -> tuple[int, str]:
        """Run one stage under min(timeout, time left); its output into the log; (exit code, output)."""
        left = self.end - time.monotonic()
        if left < 5:
            self.say(f"== {name}: skipped, the {self.args.budget:.0f} s budget is spent")
            self.failed.append(name)
            return 124, ""
        limit = min(timeout, left)
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "PYTHONUNBUFFERED": "1"}
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, env=env, cwd=ROOT)
            rc, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            rc = 124
            text = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        took = time.monotonic() - t0
        self.log.write(f"---- {name}: {' '.join(cmd)}\n{text}\n")
        state = "ok" if rc == 0 else ("TIMED OUT" if rc == 124 else f"exit {rc}")
        self.say(f"== {name}: {state} in {took:.0f} s (limit {limit:.0f} s)")
        if rc not in (0, 3):
            self.failed.append(name)
        return rc, text

    def path(self, name: str, kind: str = "") -> Path:
        """A model file of the check: NAME_WIDTH[_KIND].onnx under the work folder."""
        return self.work / "models" / f"{name}_{self.args.width}{'_' + kind if kind else ''}.onnx"


def _fuseview(*args: str) -> list[str]:
    return [sys.executable, "-m", "fuseview", *args]


def _self(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *args]


def machine(check: Check) -> None:
    """What the machine is: the GPU, onnxruntime's providers, torch's CUDA."""
    code = ("import onnxruntime as o, torch;"
            " print('onnxruntime', o.__version__, o.get_available_providers());"
            " print('torch', torch.__version__, 'cuda', torch.cuda.is_available())")
    _, text = check.stage("machine", [sys.executable, "-c", code], 60)
    smi = subprocess.run(["sh", "-c", "nvidia-smi --query-gpu=name,driver_version,memory.total"
                          " --format=csv,noheader 2>/dev/null || echo no nvidia-smi"],
                         capture_output=True, text=True).stdout
    for line in (smi + text).strip().splitlines():
        check.say(f"  {line}")


def build(check: Check) -> None:
    """Export the models, fuse them (fp32, fp16 where fuse has --float16), run the optimizer."""
    a = check.args
    check.stage("models", [sys.executable, str(HERE / "gpu_models.py"), "--out", str(check.work / "models"),
                           "--width", a.width], 240)
    dims = ["--dim", "batch=1", "--dim", f"seq={a.seq}"]
    for name in MODELS:
        fused = str(check.path(name, "fused"))
        check.stage(f"fuse {name}", _fuseview("fuse", str(check.path(name)), "-o", fused,
                                              "--provider", a.provider, *dims), 150)
    _, helptext = check.stage("fuse --help", _fuseview("fuse", "--help"), 30)
    if "--float16" not in helptext:
        check.say("== fp16: skipped: this fuseview's `fuse` has no --float16")
    else:
        for name in MODELS:
            check.stage(f"fp16 original {name}", _self("--stage", "fp16", "--src", str(check.path(name)),
                                                       "--dst", str(check.path(name, "fp16"))), 90)
            check.stage(f"fuse --float16 {name}", _fuseview(
                "fuse", str(check.path(name)), "-o", str(check.path(name, "fp16_fused")), "--float16",
                "--provider", a.provider, *dims), 150)
    for name, kind in ORT_TYPES.items():
        check.stage(f"ort optimizer {name}", _self("--stage", "ortopt", "--src", str(check.path(name)),
                                                   "--dst", str(check.path(name, "ortopt")), "--type", kind,
                                                   "--provider", a.provider), 120)


def report(check: Check) -> None:
    """The table, then per model: placement, device time, deployment check, roofline; tune on the Llama."""
    a = check.args
    rc, text = check.stage("table", _self("--stage", "table", "--work", str(check.work), "--width", a.width,
                                          "--provider", a.provider, "--shapes", *a.shapes,
                                          "--runs", str(a.runs)), 150)
    table = [ln for ln in text.splitlines() if ln.startswith("|")]
    (check.out / "table.md").write_text("\n".join(table) + "\n", encoding="utf-8")
    for ln in table + [ln for ln in text.splitlines() if "left out of the table" in ln]:
        check.say(ln)
    for name in MODELS:
        if check.path(name, "fused").is_file():
            _profile_pair(check, name, (check.path(name), check.path(name, "fused")), name, "float32 ")
    rc, text = check.stage("tune llama", _fuseview(
        "tune", str(check.path("llama")), "-o", str(check.path("llama", "tuned")), "--provider", a.provider,
        "--dim", "batch=1", "--dim", f"seq={a.seq}", "--budget", str(a.tune_budget)), a.tune_budget + 90)
    for ln in text.strip().splitlines()[-8:]:
        check.say(f"  {ln}")
    if a.provider == "cuda":  # the sample fusions of cuda_check.sh: a valid one passes, a broken one exits 3
        env_out = ["env", f"OUT={check.work / 'cuda_check'}"]
        _, text = check.stage("cuda_check.sh samples", env_out + ["bash", str(HERE / "cuda_check.sh"),
                                                                  "/no/gpt2 (skipped)"], 120)
        for ln in text.strip().splitlines()[-3:]:
            check.say(f"  {ln}")


def _profile_pair(check: Check, label: str, pair: tuple[Path, Path], stem: str, precision: str) -> None:
    """`fuseview profile A --against B` on the device: its key lines, and a failed output check noted."""
    a = check.args
    rc, text = check.stage(f"profile {label}", _fuseview(
        "profile", str(pair[0]), "--against", str(pair[1]), "--provider", a.provider, "--dim", "batch=1",
        "--dim", f"seq={a.seq}", "--runs", str(a.runs), "--sessions", "1", "--quiet", "--json",
        str(check.out / f"{stem}_profile.json")), 150)
    for ln in text.splitlines():
        if any(k in ln for k in KEEP):
            check.say(f"  {ln.strip()}")
    if rc == 3:
        check.say(f"  !! {label}: the {precision}output check FAILED")
        check.failed.append(f"verdict {label}")


def float16(check: Check) -> None:
    """The float16 pairs profiled on the device, the window's Session on the Llama, tune --float16."""
    a = check.args
    for name in MODELS:
        pair = check.path(name, "fp16"), check.path(name, "fp16_fused")
        if all(p.is_file() for p in pair):
            _profile_pair(check, f"fp16 {name}", pair, f"{name}_fp16", "")
    _, text = check.stage("session llama", _self("--stage", "session", "--src", str(check.path("llama")),
                                                 "--seq", str(a.seq)), 150)
    for ln in text.strip().splitlines()[-4:]:
        check.say(f"  {ln}")
    _, text = check.stage("tune --float16 llama", _fuseview(
        "tune", str(check.path("llama")), "-o", str(check.path("llama", "fp16_tuned")), "--float16",
        "--provider", a.provider, "--dim", "batch=1", "--dim", f"seq={a.seq}",
        "--budget", str(a.tune_budget)), a.tune_budget + 90)
    for ln in text.strip().splitlines()[-8:]:
        check.say(f"  {ln}")


def run_check(args: argparse.Namespace) -> int:
    """All stages; exit 0 when every stage ran and no output check failed."""
    check = Check(args)
    t0 = time.monotonic()
    check.say(f"fuseview device check: provider {args.provider}, width {args.width},"
              f" budget {args.budget:.0f} s")
    machine(check)
    build(check)
    report(check)
    float16(check)
    criteria(check)
    check.say(f"== done in {time.monotonic() - t0:.0f} s; "
              + ("all stages ok" if not check.failed else f"not ok: {', '.join(check.failed)}"))
    return 0 if not check.failed else 1


# ------------------------------------------------------------------------------ stages run in a child


def _first(cell: str) -> float | None:
    """The ratio of a table cell ('0.498 [0.49, 0.51]'); None for '—'."""
    try:
        return float(cell.split()[0])
    except (ValueError, IndexError):
        return None


def _table_criteria(table: list[str]) -> list[tuple[str, float | None, float]]:
    """(what, figure, bound) per row of issue 35's table: each figure must be at most its bound."""
    out = []
    for row in table[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        name, shape, fused, _opt, fused_opt, fp16 = cells[:6]
        if name in ("gpt2", "bert"):
            out += [(f"{name} {shape} fused ÷ original", _first(fused), 0.55),
                    (f"{name} {shape} fused ÷ optimizer", _first(fused_opt), 0.70)]
        else:
            out.append((f"{name} {shape} fused ÷ original (no CPU fallback)", _first(fused), 1.0))
        out.append((f"{name} {shape} fp16 fused ÷ fp16 original", _first(fp16), 0.8))
    return out


def _profile_criteria(out: Path) -> list[str]:
    """Per profile, one line: the output check, no work moved to the CPU, per-node device sum vs GPU busy."""
    import json

    lines, roof = [], None
    for path in sorted(out.glob("*_profile.json")):
        rep = json.loads(path.read_text(encoding="utf-8"))
        cmp = rep.get("comparison") or {}
        flag = cmp.get("placement_flag")
        parts = [f"outputs pass: {'met' if cmp.get('passed') else 'NOT MET'}",
                 "no work moved to the CPU: " + ("met" if not flag else f"NOT MET ({flag})")]
        for m in rep["models"]:
            dev = m.get("device_time") or {}
            if dev.get("available"):
                busy, total = dev["busy_us"]["mean"], dev["node_sum_us"]
                ok = busy > 0 and abs(total - busy) <= 0.10 * busy
                parts.append(f"{m['role']} device sum {total:.1f} us / busy {busy:.1f} us (within 10 %):"
                             f" {'met' if ok else 'NOT MET'}")
            else:
                parts.append(f"{m['role']} device time: {dev.get('reason', 'none')}")
            roof = roof or (m.get("roofline") or {}).get("machine")
        lines.append(f"{path.stem.removesuffix('_profile')}: " + "; ".join(parts))
    if roof:
        peaks = f"{roof['peak_gbps']:.0f} GB/s, {roof['peak_gflops']:.0f} GFLOP/s"
        lines.append(f"roofline: {peaks} ({roof['method']})")
    return lines


def criteria(check: Check) -> None:
    """Issue 35's 'done means', each with its figure: met, NOT MET, or not measured."""
    check.say("== criteria (issue 35, done means)")
    table_file = check.out / "table.md"
    table = table_file.read_text(encoding="utf-8").splitlines() if table_file.is_file() else []
    rows = _table_criteria(table)
    for what, figure, bound in rows:
        state = "not measured" if figure is None else ("met" if figure <= bound else "NOT MET")
        check.say(f"  {what}: {'—' if figure is None else f'{figure:.3f}'} (≤ {bound}): {state}")
    for line in _profile_criteria(check.out):
        check.say(f"  {line}")
    if check.args.provider != "cuda":
        check.say("  (provider cpu: the dry run; the figures are the CPU's, the bounds are the GPU's)")


def _session(src: str, seq: int) -> None:
    """What the window's Session does on this machine: provider auto, float16 conversion, scan, apply."""
    from fuseview.session import Session

    s = Session()
    s.set_fusion_settings(provider="auto", float16=True)  # as ticked in the window before opening
    opened = s.open(src)
    assert opened.wait(180) and s.root is not None, "the session's open and conversion did not end"
    s.set_dims({"batch": 1, "seq": seq})
    job = s.start_scan()
    assert job is not None and job.wait(120) and s.scan is not None, "the session's scan did not end"
    gqa = sum(c.fused_op == "GroupQueryAttention" for c in s.scan.candidates)
    shown = s.converted_from is not None
    print(f"session: provider auto -> {s.scan_for}; float16 conversion on show: {shown};"
          f" {len(s.scan.candidates)} candidates, {gqa} GroupQueryAttention")
    s.accept_all()
    job = s.apply()
    assert job is not None and job.wait(240) and s.fused is not None, "the session's apply did not end"
    print(f"session apply: {s.fused.validation_text()}")
    if s.fused.report and s.fused.report.floor:
        print(f"session apply: {s.fused.report.floor}")


def _fp16(src: str, dst: str) -> None:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    onnx.save(convert_float_to_float16(onnx.load(src), keep_io_types=True), dst)


def _ortopt(src: str, dst: str, kind: str, provider: str) -> None:
    from onnxruntime.transformers.optimizer import optimize_model

    heads, hidden = (12, 768) if "real" in Path(src).name else (4, 64)
    opt = optimize_model(src, model_type=kind, num_heads=heads, hidden_size=hidden, opt_level=0,
                         use_gpu=provider == "cuda")
    opt.save_model_to_file(dst)


def _ratio(est: object) -> str:
    lo, hi = est.ci  # type: ignore[attr-defined]
    return f"{1 / est.speedup_p50:.3f} [{1 / hi:.3f}, {1 / lo:.3f}]"  # type: ignore[attr-defined]


def _sessions(name: str, paths: dict[str, Path], provider: str, feeds: dict) -> dict:
    """A session per variant that loads and runs on `provider`; the others named in one line each."""
    from fuseview.runtime.sessions import create_session

    out = {}
    for kind, path in paths.items():
        try:
            sess = create_session(str(path), provider, "all")[0]
            sess.run(None, feeds)
            out[kind] = sess
        except Exception as exc:  # noqa: BLE001 - one variant that cannot run leaves the others' columns
            print(f"{name} {kind or 'original'}: left out of the table: {str(exc).splitlines()[0][:200]}")
    return out


def _table(work: Path, width: str, provider: str, shapes: list[str], runs: int) -> None:
    """Issue 35's table: interleaved bound runs of each model's variants on `provider`."""
    import onnx

    from fuseview.runtime.inputs import make_feeds
    from fuseview.runtime.profiling import interleaved_latency
    from fuseview.stats import compare_timings

    print("| model | shape | fused ÷ original | optimizer ÷ original | fused ÷ optimizer"
          " | fp16 fused ÷ fp16 |")
    print("|---|---|---|---|---|---|")
    for name in MODELS:
        paths = {k: work / "models" / f"{name}_{width}{'_' + k if k else ''}.onnx"
                 for k in ("", "fused", "ortopt", "fp16", "fp16_fused")}
        have = {k: p for k, p in paths.items() if p.is_file()}
        if "" not in have:
            continue
        graph = onnx.load(str(have[""]), load_external_data=False)
        sessions = _sessions(name, have, provider, make_feeds(graph, {"batch": 1, "seq": 8}))
        for shape in shapes:
            b, s = (int(x) for x in shape.split("x"))
            feeds = make_feeds(graph, {"batch": b, "seq": s})
            keys = list(sessions)
            timed = interleaved_latency([sessions[k] for k in keys], feeds, runs, 5)
            times = dict(zip(keys, timed, strict=True))

            def cell(num: str, den: str, t: dict = times) -> str:
                return _ratio(compare_timings(t[den], t[num])) if num in t and den in t else "—"

            print(f"| {name} | {b}×{s} | {cell('fused', '')} | {cell('ortopt', '')}"
                  f" | {cell('fused', 'ortopt')} | {cell('fp16_fused', 'fp16')} |", flush=True)
        del sessions


def main(argv: list[str] | None = None) -> int:
    """The check, or one of its stages in a child process."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.environ.get("OUT", "gpu_check_out"))
    p.add_argument("--work", default="/tmp/fuseview-gpu-check")
    p.add_argument("--provider", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--width", choices=("real", "tiny"), default="real")
    p.add_argument("--shapes", nargs="+", default=["1x128", "8x512"])
    p.add_argument("--seq", type=int, default=128, help="sequence length of fuse, profile and tune")
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--tune-budget", type=int, default=60)
    p.add_argument("--budget", type=float, default=360.0, help="seconds for the whole check")
    p.add_argument("--stage", choices=("table", "fp16", "ortopt", "session"), help=argparse.SUPPRESS)
    p.add_argument("--src", help=argparse.SUPPRESS)
    p.add_argument("--dst", help=argparse.SUPPRESS)
    p.add_argument("--type", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.stage == "table":
        _table(Path(args.work), args.width, args.provider, args.shapes, args.runs)
    elif args.stage == "fp16":
        _fp16(args.src, args.dst)
    elif args.stage == "ortopt":
        _ortopt(args.src, args.dst, args.type, args.provider)
    elif args.stage == "session":
        _session(args.src, args.seq)
    else:
        return run_check(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
