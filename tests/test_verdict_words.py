"""Issue 37.4: no text of `trace` (CLI, report, the window's kernel rows) says faster or slower where its
interval says "cannot tell": every committed capture and trace pair is read and scanned."""

from __future__ import annotations

import pytest

from fuseview.cli import main
from fuseview.traces.compare import ratio_phrase
from tests.conftest import ROOT
from tests.verdict_words import assert_words_follow_intervals, contradictions, kernel_blocks

TRACES = ROOT / "tests" / "data" / "traces"
CAPTURES = sorted(p for p in (TRACES / "provenance").iterdir() if (p / "eager.json").is_file())
PAIRS = sorted((p, p.with_name(p.name.replace("_eager", "_compiled"))) for p in TRACES.glob("*_eager.json"))


def test_the_scanner_catches_the_words_issue_37_saw():
    assert contradictions("kernel 1.0x faster than the ops it replaced\n  replaced/kernel: 1.04x [0.93, 1.19]"
                          " cannot tell (95% CI)")
    assert contradictions("kernel 1.1x slower than the ops it replaced; 0.94x [0.82, 1.11] cannot tell")
    assert contradictions("0.59x [0.53, 1.06] no difference")  # the old rule's word for a wide interval
    assert not contradictions("kernel 3.2x faster than the ops it replaced; 3.21x [2.80, 6.62] faster")
    assert not contradictions("kernel vs the ops it replaced: cannot tell; 1.04x [0.93, 1.19] cannot tell")


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_every_capture_reads_as_its_intervals(capture, capsys, tmp_path):
    import json

    assert main(["trace", str(capture), "--json", str(tmp_path / "r.json")]) == 0
    text = capsys.readouterr().out
    assert_words_follow_intervals(kernel_blocks(text))
    rep = json.loads((tmp_path / "r.json").read_text())
    blocks = []
    for k in rep["diff"]["fused_kernels"]:
        sp = k.get("speedup")
        words = ratio_phrase(k["time_us"], k["replaced_us"], sp)
        blocks.append(f"{words}; {sp['summary']}" if sp else words)
    assert_words_follow_intervals(blocks)
    from fuseview.ui.trace_kernels import kernel_rows  # the window's rows (Qt-free)

    assert_words_follow_intervals([f"{r['verdict']}; {r['interval']}" for r in kernel_rows(rep)])


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: p[0].name)
def test_every_trace_pair_reads_as_its_intervals(pair, capsys):
    assert main(["trace", str(pair[0]), str(pair[1])]) == 0
    assert_words_follow_intervals(kernel_blocks(capsys.readouterr().out))


def test_the_window_names_the_ops_a_rewrite_replaced():
    """Issue 37.4: the SDPA row lists its provenance's ops, then the matmul and softmax it rewrote."""
    import json

    from fuseview.ui.trace_kernels import kernel_rows

    capture = TRACES / "provenance" / "gpt2_block"
    from fuseview.traces.report import build_report
    from fuseview.traces.stats import load_trace
    from fuseview.traces.torch_log import read_compile_log

    after = load_trace(capture / "compiled.json")
    rep = json.loads(json.dumps(build_report(load_trace(capture / "eager.json"), after,
                                             read_compile_log(capture / "torch_trace", after))))
    sdpa = next(r for r in kernel_rows(rep) if "scaled_dot_product" in r["name"])
    named, _, rewritten = sdpa["ops"].partition("; rewritten with them: ")
    assert "aten::view" in named and {"aten::matmul", "aten::softmax"} <= set(rewritten.split(", "))
    assert sdpa["verdict"].startswith("kernel")
