"""Issue 30: the CLI's text tables (scan, profile, tune) size their columns to their content."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fuseview.texttable import table_lines
from tests.conftest import ASSET_MODELS, ROOT


def test_columns_are_as_wide_as_their_widest_cell():
    lines = table_lines(
        [["skip_rms_norm", "com.microsoft:SkipSimplifiedLayerNormalization", "8"], ["x", "Reshape", "120"]],
        "llr", header=["rule", "op", "n"],
    )
    assert lines == [
        "  rule           op                                                n",
        "  skip_rms_norm  com.microsoft:SkipSimplifiedLayerNormalization    8",
        "  x              Reshape                                         120",
    ]
    # the last column is not padded; a control character counts as the escape it prints as
    assert table_lines([["a\tb", "end"], ["c", "x"]]) == ["  a\tb  end", "  c       x"]  # a\x09b: 6


def _cli(*args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "fuseview", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_scan_rows_align_with_and_without_a_domain():
    out = _cli("scan", str(ASSET_MODELS / "current" / "llama_2l_sdpa_past_dynamo.onnx"))
    rows = [line for line in out.splitlines() if line.startswith("  ") and " nodes " in line]
    assert any("com.microsoft:" in r for r in rows)
    assert any(" SimplifiedLayerNormalization " in r for r in rows)  # no domain
    for word in (" nodes ", "saves", " at "):
        assert len({r.index(word) for r in rows}) == 1, word


def test_profile_op_type_table_aligns(tmp_path):
    from fuseview import DEMO_MODEL

    out = _cli("profile", str(DEMO_MODEL), "--runs", "3", "--warmup", "1")
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("op type"))
    end = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("top nodes"))
    table = lines[start:end]
    assert len(table) >= 5
    assert len({len(line) for line in table}) == 1, table  # every column after the provider right-aligned
    provider = table[0].index("provider")
    assert all(line[provider - 2:provider] == "  " and line[provider] != " " for line in table)


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_tune_summary_tables_align():
    import io

    from fuseview.commands.tune import print_summary
    from fuseview.tuning.settings import TuneSettings
    from fuseview.workflows.tune import tune
    from tests.test_tune import CONV, FAST

    # the layout is the point, not the verdict: a budget that ends sooner gives the same groups and decisions
    rep = tune(CONV, TuneSettings(budget_s=4, **FAST)).report
    out = io.StringIO()
    print_summary(rep, out)
    lines = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("groups"))
    end = next(i for i, line in enumerate(lines) if line.startswith("decisions"))
    rows = lines[start + 1:end]
    assert rows and len({r.index(r.split()[1]) for r in rows}) == 1  # the counts start at one place
    # each decision's reason once, its candidates under it (issue 37.4)
    block = "\n".join(lines[end:])
    assert all(d.candidate in block for d in rep.decisions)


def test_roofline_rows_stay_aligned_on_long_op_types():
    """Issue 37.6: an op type longer than 16 characters no longer pushes its row's node name out of line."""
    from fuseview.commands.profile import roofline_lines
    from fuseview.reports.profile import ModelProfile, TimeStats

    node = {"bound": "memory", "flops": 100.0, "bytes": 50.0, "achieved_gbps": 3.5}
    nodes = [dict(node, time_us=t, op_type=op, node=f"n{i}")
             for i, (t, op) in enumerate([(30.0, "Add"), (20.0, "SkipSimplifiedLayerNormalization"),
                                          (1500.0, "GroupQueryAttention")])]
    roof = {"machine": {"peak_gbps": 20.0}, "non_gemm_share": 0.5, "nodes": nodes}
    t = TimeStats(1.0, 1.0, 1.0)
    m = ModelProfile("original", None, {}, "all", 2, 0, t, t, t, [], [], False, extra={"roofline": roof})
    rows = roofline_lines(m)[2:]
    assert len(rows) == 3
    assert len({r.index(f"n{i}") for i, r in zip((2, 0, 1), rows, strict=True)}) == 1
    assert len({r.index(op) for r, op in zip(rows, ("Group", "Add", "Skip"), strict=True)}) == 1
