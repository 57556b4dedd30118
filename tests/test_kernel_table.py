"""The committed kernel table (fuseview/data/ort_kernels.json): lookups; CPU rows against this build."""

from __future__ import annotations

import importlib.util
import json
import sys

import onnxruntime
import pytest

from fuseview.fusion import kernels
from tests.conftest import ROOT

if str(ROOT / "scripts") not in sys.path:  # the script imports its sibling _requires, as when run
    sys.path.append(str(ROOT / "scripts"))
_spec = importlib.util.spec_from_file_location("make_kernel_table", ROOT / "scripts" / "make_kernel_table.py")
assert _spec is not None and _spec.loader is not None
make_kernel_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_kernel_table)


def test_fp32_gqa_has_no_cuda_kernel_but_fp16_does() -> None:
    assert kernels.has_kernel("cuda", "com.microsoft", "GroupQueryAttention", "float") is False
    assert kernels.has_kernel("cuda", "com.microsoft", "GroupQueryAttention", "float16") is True
    assert kernels.has_kernel("cuda", "com.microsoft", "MultiHeadAttention", "float") is True
    assert kernels.has_kernel("cpu", "com.microsoft", "GroupQueryAttention", "float") is True
    assert kernels.has_kernel("cuda", "com.microsoft", "NoSuchOp", "float") is None
    reason = kernels.missing_kernel("cuda", "com.microsoft", "GroupQueryAttention", "float")
    assert reason == "no float GroupQueryAttention kernel on CUDA (it has float16, bfloat16)"
    assert kernels.missing_kernel("cuda", "com.microsoft", "GroupQueryAttention", "float16") is None


def test_cpu_rows_match_the_installed_build() -> None:
    doc = json.loads(kernels.TABLE.read_text(encoding="utf-8"))
    source = doc["sources"]["CPUExecutionProvider"]
    if not source.endswith(f"onnxruntime {onnxruntime.__version__}"):
        pytest.skip(f"the table's CPU rows are from {source}, this is onnxruntime {onnxruntime.__version__}")
    _, installed = make_kernel_table.from_installed()
    assert doc["kernels"]["CPUExecutionProvider"] == installed["CPUExecutionProvider"]


def test_markdown_parser_reads_type_constraints(tmp_path) -> None:
    md = ("## Operators implemented by CUDAExecutionProvider\n\n|**Operator Domain:** *com.microsoft*||||\n"
          "|GroupQueryAttention|*in* query:**T**|1+|**M** = tensor(int32)<br/> **T** = tensor(bfloat16), "
          "tensor(float16)|\n|FusedConv|*in* X:**T**|1+|**T** = tensor(float)|\n")
    table = make_kernel_table.from_markdown(md)
    gqa = {"GroupQueryAttention": ["float16", "bfloat16"]}
    assert table == {"CUDAExecutionProvider": {"com.microsoft": gqa}}


LLAMA = ROOT / "assets" / "models" / "current" / "llama_2l_sdpa_past_ts17.onnx"


def test_scan_for_cuda_turns_fp32_gqa_into_a_near_miss_naming_the_alternative() -> None:
    from fuseview.fusion.scan import scan_file

    on_cpu = scan_file(LLAMA, provider="cpu")
    on_cuda = scan_file(LLAMA, provider="cuda")
    assert any(c.fused_op == "GroupQueryAttention" for c in on_cpu.candidates)
    assert not any(c.fused_op == "GroupQueryAttention" for c in on_cuda.candidates)
    assert any(c.fused_op == "MultiHeadAttention" for c in on_cuda.candidates)  # the fp32 alternative stays
    reasons = [m.reason for m in on_cuda.near_misses if m.rule.startswith("attention_gqa")]
    assert reasons and all(r.startswith("no float GroupQueryAttention kernel on CUDA") for r in reasons)
    assert "MultiHeadAttention with repeated KV" in reasons[0]


def test_scan_cli_says_which_provider(capsys) -> None:
    from fuseview.cli import main

    assert main(["scan", str(LLAMA), "--provider", "cuda", "--near-misses"]) == 0
    out = capsys.readouterr().out
    assert "provider   cuda (asked" in out and "no float GroupQueryAttention kernel on CUDA" in out


def test_fuse_for_cuda_writes_no_cpu_only_op(tmp_path, capsys) -> None:
    import onnx

    from fuseview import api
    from fuseview.cli import main

    out = tmp_path / "fused.onnx"
    assert main(["fuse", str(LLAMA), "-o", str(out), "--provider", "cuda", "--seeds", "1"]) == 0
    assert "provider cuda (asked" in capsys.readouterr().out
    ops = {n.op_type for n in onnx.load(str(out), load_external_data=False).graph.node}
    assert "GroupQueryAttention" not in ops and "MultiHeadAttention" in ops
    assert not [c for c in api.scan(LLAMA, provider="cuda").candidates if c.fused_op == "GroupQueryAttention"]
    assert [c for c in api.scan(LLAMA, provider="cpu").candidates if c.fused_op == "GroupQueryAttention"]


def test_tune_scans_for_the_provider_it_measures_on() -> None:
    import onnxruntime as ort

    from fuseview.tuning.run import scan_provider

    assert scan_provider("cuda") == "cuda" and scan_provider("cpu") == "cpu"
    has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
    assert scan_provider("auto") == ("cuda" if has_cuda else "cpu")


def test_the_session_scans_for_its_provider() -> None:
    from fuseview.graph.loader import load_document
    from fuseview.session import Session

    s = Session()
    doc = load_document(LLAMA)
    s.adopt(doc, s.initial_expansion(doc))
    s.provider = "cuda"
    job = s.start_scan()
    assert job is not None and job.wait(120)
    assert s.scan is not None and s.scan.candidates
    assert not [c for c in s.scan.candidates if c.fused_op == "GroupQueryAttention"]
