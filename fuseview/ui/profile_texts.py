"""The Profile dock's texts of a report: the headline verdict, the summary line, where it was made."""

from __future__ import annotations

from pathlib import Path

from fuseview.session.exports import (
    DOCK_CONTROLS,
    cannot_tell,
    cannot_tell_text,
    deployment_lines,
    device_summary,
    latency_verdict,
    speedup_text,
)
from fuseview.ui import profile_plots as plots

CPU_EP = "CPUExecutionProvider"


def provider_text(report: dict) -> str:
    """'CPU — onnxruntime build has no CUDAExecutionProvider' (one entry per distinct provider choice)."""
    seen = []
    for m in report["models"]:
        p = m.get("provider") or {}
        short = str(p.get("provider", "?")).replace("ExecutionProvider", "")
        text = f"{short} — {p['reason']}" if p.get("reason") else short
        if text not in seen:
            seen.append(text)
    return "; ".join(seen)


def placement_lines(report: dict) -> list[str]:
    """Per model, where its nodes ran: nodes and share of host-side node time per provider, Memcpy nodes."""
    lines = []
    for role, m in plots.models_by_role(report).items():
        place = m.get("placement")
        if not place:
            continue  # a report made before placement was recorded
        parts = [f"{p.replace('ExecutionProvider', '')} {r['nodes']} nodes {r['share']:.0%}"
                 for p, r in place["providers"].items()]
        lines.append(f"Placement {role}: {', '.join(parts)} of its host-side node time;"
                     f" Memcpy nodes {len(place['memcpy_nodes'])}")
    return lines


def placement_flag(report: dict) -> str | None:
    """'fusion moved work to the CPU: …' when the fused model runs more of its time on the CPU EP."""
    cmp = report.get("comparison") or {}
    flag = cmp.get("placement_flag")
    return str(flag) if flag else None


def precision_text(report: dict) -> str:
    """' (float16)' when every model is measured in one float type, ' (float32, float16)' per model; '' for a
    report that does not say."""
    kinds = [m.get("precision") for m in report["models"]]
    if not all(kinds):
        return ""
    return f" ({kinds[0]})" if len(set(kinds)) == 1 else f" ({', '.join(str(k) for k in kinds)})"


def environment_text(report: dict, source: str | None = None) -> str:
    """Where and when the report was made: onnxruntime version, GPU, CPU, platform."""
    env = report["environment"]
    parts = [f"made {report.get('created', '?')}", f"onnxruntime {env['onnxruntime']}"]
    if env.get("gpu"):
        parts.append(f"GPU {env['gpu']}")
    if env.get("cpu"):
        parts.append(f"CPU {env['cpu']}")
    parts.append(env.get("platform", ""))
    head = f"Report {Path(source).name}: " if source else "Report: "
    return head + " · ".join(p for p in parts if p)


def headline_text(report: dict) -> str:
    """The speed-up with its interval and verdict (never a bare ratio); '' for a single model."""
    if len(report["models"]) < 2:
        return ""
    lat = latency_verdict(report)
    if lat is None:
        return "Speed-up: not shown (a version 1 report has no interval; profile again for a verdict)"
    # the verdict is said of the `against` model; the fused one is `against` unless the report is reversed
    roles = plots.model_roles(report)
    first, second = roles
    if cannot_tell(lat):  # the ratio is withheld: it would lead the line and mean nothing
        return f"Speed-up {first}/{second}: {cannot_tell_text(report, DOCK_CONTROLS)}"
    verdict = lat["verdict"] if lat["verdict"] == "no difference" else f"{second} {lat['verdict']}"
    return f"Speed-up {first}/{second} p50 {speedup_text(lat).replace(lat['verdict'], verdict, 1)}"


def summary_text(report: dict) -> str:
    """The speed-up headline, median latency per model and whether the outputs matched."""
    by_role = plots.models_by_role(report)
    inputs = report["inputs"]
    dims = ", ".join(f"{k}={v}" for k, v in inputs.get("dims", {}).items())
    bits = [f"{role} {m['latency_ms']['p50']:.3f} ms" for role, m in by_role.items()]
    head = headline_text(report)
    latency = f"Latency p50, wall time{precision_text(report)}: "
    text = (head + "\n" if head else "") + latency + ", ".join(bits)
    lat = latency_verdict(report)
    if lat is not None and lat["noise"]["warning"] and not cannot_tell(lat):  # the headline said why
        text += f" ({lat['noise']['warning']})"
    runs = report["models"][0]
    profiled = ""
    if "profiled_runs" in runs:
        profiled = f", per-node times from {runs['profiled_runs']} profiled runs"
    text += f" · {runs['runs']} runs after {runs['warmup']} warm-up{profiled}"
    text += f" · latency at ORT opt {runs.get('latency_ort_opt', runs['ort_opt_level'])}, per-node times at"
    text += f" {runs['ort_opt_level']}"
    if dims:
        text += f" · dims {dims}"
    cmp = report.get("comparison")
    if cmp:
        on_gpu = (cmp.get("provider") or {}).get("provider", CPU_EP) != CPU_EP  # its check runs TF32 off
        at = f"{cmp.get('precision', 'float32')} tolerances, {'TF32 off, ' if on_gpu else ''}"
        result = "PASS" if cmp["passed"] else "FAIL"
        text += f" · outputs {result} ({at}atol {cmp['atol']:g}, rtol {cmp['rtol']:g})"
    lines = [text]
    if inputs.get("note"):  # a KV-cache decoder measured at its decode step: which cache it used
        lines.append(f"{str(inputs['note'])[0].upper()}{str(inputs['note'])[1:]}")
    lines += placement_lines(report)
    lines += [device_summary(m.get("device_time"), m["node_sum_us"]["mean"], role) or ""
              for role, m in by_role.items()]
    if cmp and cmp.get("deployment"):
        lines += deployment_lines(cmp["deployment"])
    return "\n".join(line for line in lines if line)
