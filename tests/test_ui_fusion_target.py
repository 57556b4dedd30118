"""What the window fuses for, in the real window (offscreen): the candidates dock's 'Fuse for' provider and
float16 box (views of Session.fusion_settings), the tune dialog's precision, and the Profile dock's placement,
its 'fusion moved work to the CPU' flag and the precision of its numbers, on real models and profiles."""

from __future__ import annotations

import json

import pytest

from fuseview.graph.geometry import node_key
from fuseview.runtime.job import ProfileRequest, run_profile
from fuseview.runtime.placement import CPU_PROVIDER, moved_to_cpu, placement
from fuseview.runtime.report import save_report
from fuseview.session.fusion_target import precision_label
from fuseview.ui.profile_panel import ProfilePanel
from fuseview.ui.tune_dialog import TuneDialog

from .conftest import ASSET_MODELS, GPT2_MODELS
from .test_ui_workbench import MS, apply_and_wait, open_scanned, win  # noqa: F401 - the window fixture

LLAMA = ASSET_MODELS / "current" / "llama_2l_sdpa_past_ts17.onnx"
GPT2 = ASSET_MODELS / "current" / "gpt2_2l_sdpa_ts17.onnx"
CUDA_EP = "CUDAExecutionProvider"


def test_fuse_for_cuda_rescans_and_shows_the_missing_kernel_as_a_near_miss(qtbot, win):  # noqa: F811
    open_scanned(qtbot, win, LLAMA)
    wb = win.workbench
    bar = wb.target_bar
    assert bar.provider.currentData() == "any" and not bar.float16.isChecked()
    assert any(c.fused_op == "GroupQueryAttention" for c in wb.session.decisions.candidates)
    with qtbot.waitSignal(wb.scanned, timeout=MS):
        bar.provider.setCurrentIndex(bar.provider.findData("cuda"))
    assert wb.session.fusion_settings.provider == "cuda" and wb.session.scan_for == "cuda"
    d = wb.session.decisions
    assert not any(c.fused_op == "GroupQueryAttention" for c in d.candidates)
    assert wb.panel.table.rowCount() == len(d.candidates)
    assert "for CUDA" in win.session.status
    miss = next(m for m in d.scan.near_misses if "GroupQueryAttention kernel on CUDA" in m.reason)
    item = win.scene.boxes[node_key(wb.session.root.graph.node_by_name[miss.nodes[0]])]
    assert miss.reason in item.toolTip()
    win.scene.select_keys([item.key])
    assert "MultiHeadAttention with repeated KV (fp32)" in win.inspector.text()
    # the tune dialog starts on the provider the candidates were found for
    dialog = TuneDialog(win, wb.tuner.dialog_settings())
    qtbot.addWidget(dialog)
    assert dialog.provider.currentText() == "cuda"


@pytest.mark.slow
def test_float16_box_shows_the_conversion_applies_it_and_says_the_precision(qtbot, win):  # noqa: F811
    open_scanned(qtbot, win, GPT2)
    wb = win.workbench
    original = wb.session.root
    with qtbot.waitSignal(wb.scanned, timeout=MS):
        wb.target_bar.float16.setChecked(True)
    assert wb.session.converted_from is original and wb.session.root.path is None
    assert win.windowTitle() == f"{GPT2.name} (float16 conversion) — fuseview"
    graph = wb.session.root.graph
    casts = [n for n in graph.nodes if n.op_type == "Cast" and n.name not in original.graph.node_by_name]
    assert casts and any(node_key(c.index) in win.scene.boxes for c in casts)  # the converter's Casts, drawn
    wb.panel.accept_all()
    apply_and_wait(qtbot, win)
    title = wb.fused_pane.title
    assert "float16 max |diff|" in title.full_text
    assert "at float16 tolerances" in title.details and "its own noise floor" in title.details
    dialog = TuneDialog(win, wb.tuner.dialog_settings(), precision_label(wb.session))
    qtbot.addWidget(dialog)
    assert dialog.precision.text().startswith("float16 (the float32 model's conversion")
    assert "atol 0.01, rtol 0.01" in dialog.precision.text()
    with qtbot.waitSignal(wb.scanned, timeout=MS):
        wb.target_bar.float16.setChecked(False)
    assert wb.session.root is original and win.windowTitle() == f"{GPT2.name} — fuseview"


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    """A real profile of the GPT-2 export against its fully fused version, on the CPU EP."""
    from fuseview.fusion.apply import apply_plan
    from fuseview.fusion.plan import Plan
    from fuseview.fusion.scan import load_model, scan_model

    src = GPT2_MODELS / "gpt2_2l_ts17.onnx"
    model = load_model(src)
    plan = Plan(scan_model(model).candidates)
    plan.accept_all()
    folder = tmp_path_factory.mktemp("placement")
    fused = folder / "fused.onnx"
    import onnx

    onnx.save(apply_plan(model, plan.accepted()).model, fused)
    rep = run_profile(ProfileRequest(src, fused, runs=3, warmup=1, dims={"seq": 16}))
    return save_report(rep, folder / "report.json")


def test_the_profile_dock_says_where_nodes_ran_and_in_which_precision(qtbot, cpu_report, tmp_path):
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    panel.open_report(cpu_report)
    rep = json.loads(cpu_report.read_text())
    assert [m["precision"] for m in rep["models"]] == ["float32", "float32"]
    text = panel.env.text()
    n = len(rep["models"][0]["nodes"])
    assert f"Placement original: CPU {n} nodes 100% of its host-side node time; Memcpy nodes 0" in text
    assert "Latency p50, wall time (float32):" in text
    assert "(float32 tolerances, atol 0.0001, rtol 0.001)" in text and "TF32" not in text
    assert "moved work" not in panel.status.text()
    assert panel.roofline_card.note.endswith("node times: CPU run time")

    # the same report as a GPU machine writes it when the fused model's heaviest node has no CUDA kernel:
    # every node on CUDA but that one, placement and flag made by runtime.placement as the profile makes them
    for i, m in enumerate(rep["models"]):
        heaviest = max(m["nodes"], key=lambda node: node["mean_us"])["name"]
        for node in m["nodes"]:
            node["provider"] = CPU_PROVIDER if i == 1 and node["name"] == heaviest else CUDA_EP
        m["placement"] = placement(m)
        m["provider"] = {"requested": "cuda", "provider": CUDA_EP, "reason": "asked for cuda"}
    rep["comparison"]["provider"] = {"provider": CUDA_EP}
    rep["comparison"]["placement_flag"] = moved_to_cpu(rep["models"][0]["placement"],
                                                       rep["models"][1]["placement"])
    assert rep["comparison"]["placement_flag"]
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps(rep))
    panel.open_report(gpu)
    assert "fusion moved work to the CPU" in panel.status.text()
    assert "b00020" in panel.status.styleSheet()  # said as a warning, in the error colour
    assert f"Placement original: CUDA {n} nodes 100%" in panel.env.text()
    fused_line = next(ln for ln in panel.env.text().splitlines() if ln.startswith("Placement fused: "))
    assert "CPU 1 nodes" in fused_line and f"CUDA {len(rep['models'][1]['nodes']) - 1} nodes" in fused_line
    assert "TF32 off" in panel.env.text()
    assert panel.roofline_card.note.endswith("node times: host-side (CUDA launches, not the device)")


@pytest.mark.slow
def test_open_takes_the_provider_and_float16(tmp_path):
    from .test_ui_workbench import _fuseview

    out = tmp_path / "fp16.png"
    r = _fuseview("open", str(LLAMA), "--provider", "cuda", "--float16", "--apply", "--screenshot", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20_000
    bad = _fuseview("open", str(LLAMA), "--provider", "tpu", "--screenshot", str(out))
    assert bad.returncode == 2 and "--provider" in bad.stderr
