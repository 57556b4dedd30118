"""`fuseview scan MODEL`: list fusion candidates (and near misses) without changing the model."""

from __future__ import annotations

import argparse
import json
from typing import Any

HELP = "list the fusion candidates of a model (never changes it)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview scan`."""
    p.add_argument("model", help="path to an .onnx file")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an input dim's value: a named one by name (seq=64), an unnamed one as INPUT:AXIS=VALUE"
        " (default batch-like 1, sequence-like 128, others 1)",
    )
    p.add_argument("--near-misses", action="store_true", help="also list rules that nearly matched, and why")
    p.add_argument("--provider", choices=("auto", "cpu", "cuda"), default="auto",
                   help="offer only fusions whose op has a kernel there for the model's dtype (default auto: "
                        "cuda when onnxruntime has CUDAExecutionProvider, else cpu)")
    p.add_argument("--float16", action="store_true",
                   help="scan the model's float16 conversion (I/O types kept), as `fuse --float16` fuses it")
    p.add_argument("--profile", metavar="REPORT.json",
                   help="a `fuseview profile --json` report of this model: each candidate gets the measured"
                   " time (us) and share of the run of the nodes it would replace")
    p.add_argument(
        "--ort-check",
        nargs="?",
        const="all",
        default=None,
        choices=("basic", "extended", "all"),
        metavar="LEVEL",
        help="also say per candidate whether onnxruntime's own optimizer (LEVEL, default all; CPU) makes "
        "that fusion from the unfused model, and list the fusions it makes that fuseview lacks "
        "(costs one onnxruntime session)",
    )


_ORT_WORD = {True: "yes", False: "no", None: "?"}


def _float16_scan(args: argparse.Namespace, dims: dict[str, int], provider: str):  # noqa: ANN202
    """The scan of the model's float16 conversion."""
    from pathlib import Path

    from fuseview.errors import FuseviewError
    from fuseview.fusion.pipeline import FuseOptions, load_for_fusion, prepare, scan_for_fusion

    if args.ort_check:
        raise FuseviewError("--ort-check looks at the file as it is: not with --float16")
    src = Path(args.model)
    model = prepare(load_for_fusion(src), FuseOptions(float16=True), src.parent)[0]
    return scan_for_fusion(model, dims, src, provider)


def run(args: argparse.Namespace) -> int:
    """Print the candidates."""
    from fuseview import collector

    collector.no_blas_threads()
    with collector.paused():  # its imports and the scan make many objects and few cycles (see collector)
        collector.import_onnx_shallow()
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from fuseview.dims import parse_dim_args
    from fuseview.fusion.kernels import default_provider
    from fuseview.fusion.scan import scan_file
    from fuseview.texttable import table_lines

    dims = parse_dim_args(args.dim)
    report = None
    if args.profile:  # the report's reader imports onnxruntime: only a scan with --profile pays for it
        from fuseview.runtime.report import load_report

        report = load_report(args.profile)
    provider, why = (args.provider, "asked") if args.provider != "auto" else default_provider()
    result = (_float16_scan(args, dims, provider) if args.float16
              else scan_file(args.model, dims, provider=provider))
    costs = {}
    if report is not None:
        from fuseview.runtime.costs import candidate_costs

        costs = candidate_costs(report, result.candidates)
    ort_cmp = None
    if getattr(args, "ort_check", None):
        from fuseview.fusion.ort_compare import compare_with_ort

        ort_cmp = compare_with_ort(args.model, result.candidates, args.ort_check, "cpu")
    if args.json:
        from fuseview.reports import ScanReport

        profile = None if report is None else {"report": args.profile, "model": report["models"][0]["path"]}
        print(json.dumps(ScanReport.of(result, costs, ort_cmp, profile).to_json(), indent=1))
        return 0
    cands = result.candidates
    print(f"model      {args.model}")
    print(f"provider   {provider} ({why}; a fused op with no kernel there is a near miss)")
    print("dims       " + (", ".join(f"{k}={v}" for k, v in result.index.dims_used.items()) or "-"))
    print(f"candidates {len(cands)}")
    if report is not None:
        print(f"measured   time of the nodes each candidate replaces (median us per run, share of the run):"
              f" {args.profile}")
        print("traffic    the memory traffic fusing removes, at the profile's measured bandwidth; memory or"
              " compute: where most of its nodes' time is (compute-bound: removing traffic wins little)")
    lines = table_lines(*_candidate_rows(cands, costs, ort_cmp))
    if lines:  # one write: a scan's table has a line per candidate (870 on a 48-layer GPT-2)
        print("\n".join(lines))
    _print_summary(args, result, ort_cmp)
    return 0


def _candidate_rows(cands: list, costs: dict, ort_cmp: Any) -> tuple[list[list[str]], str]:
    """The candidate table's rows and column alignment (measured, traffic and ort columns when known)."""
    from fuseview.units import format_bytes

    rows = []
    traffic_known = any(k.traffic_us is not None for k in costs.values())
    for c in cands:
        where = (c.nodes[-1] if c.nodes else "-") + (f" in {c.scope}" if c.scope else "")
        dom = f"{c.domain}:" if c.domain else ""
        cost = costs.get(c.id)
        measured = [f"{cost.measured_us:.1f} us", f"{cost.share * 100:.1f}%"] if cost else []
        measured = measured or (["", ""] if costs else [])
        if traffic_known:
            measured += ([f"traffic {cost.traffic_us:.1f} us", cost.bound or "-"]
                         if cost and cost.traffic_us is not None else ["", ""])
        ort_col = [f"ort {_ORT_WORD[ort_cmp.does_it.get(c.id)]}"] if ort_cmp else []
        conflicts = f"conflicts {len(c.conflicts)}" if c.conflicts else ""
        rows.append([c.id, dom + c.fused_op, f"{len(c.nodes)} nodes", "saves", format_bytes(c.saved_bytes),
                     *measured, *ort_col, f"at {where}", conflicts])
    align = "llrlr" + ("rr" if costs else "")
    if traffic_known:
        align += "rl"
    return rows, align


def _print_summary(args: argparse.Namespace, result: Any, ort_cmp: Any) -> None:
    """The lines after the table: candidates by rule, near misses, the onnxruntime check, the notes."""
    cands = result.candidates
    by_rule: dict[str, int] = {}
    for c in cands:
        by_rule[c.rule] = by_rule.get(c.rule, 0) + 1
    if by_rule:
        print("by rule    " + ", ".join(f"{k} {v}" for k, v in by_rule.items()))
    if args.near_misses:
        print(f"near misses {len(result.near_misses)}")
        for nm in result.near_misses:
            print(f"  {nm.rule:<24} {nm.nodes[-1] if nm.nodes else '-'}: {nm.reason}")
    elif result.near_misses:
        print(f"near misses {len(result.near_misses)} (--near-misses lists them)")
    if ort_cmp is not None:
        gain = sum(1 for c in cands if ort_cmp.does_it.get(c.id) is False)
        print(
            f"ort check  onnxruntime {ort_cmp.opt_level} ({ort_cmp.provider}) makes the same fusion for "
            f"{sum(1 for v in ort_cmp.does_it.values() if v)} of {len(cands)} candidates; "
            f"{gain} add value beyond it; {len(ort_cmp.ort_only)} onnxruntime fusions fuseview lacks"
        )
        for f in ort_cmp.ort_only:
            print(f"  ort only {f['op']:<36} {f['node']}")
    for note in result.notes:
        print(f"note       {note}")
