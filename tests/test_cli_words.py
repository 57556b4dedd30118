"""Issue 37.6: the CLI says what it did and takes only exact flag names; a PyTorch file gets the way out."""

from __future__ import annotations

import pickle

import pytest

from fuseview.cli import main
from tests.conftest import ROOT

MODEL = ROOT / "fuseview" / "data" / "demo_gpt2_2l.onnx"


def _error(argv, capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own exit (the one-line parser), as the console script sees it
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fuseview: error: ") and "\n" not in err
    return err


@pytest.mark.parametrize("argv", [
    ["tune", str(MODEL), "-o", "OUT", "--thread", "1"],  # was taken for --threads
    ["trace", str(ROOT / "tests" / "data" / "traces" / "ort_mlp.json"), "--onnx"],  # not --onnx-time
])
def test_a_flag_is_taken_only_by_its_exact_name(argv, capsys, tmp_path):
    argv = [str(tmp_path / "t.onnx") if a == "OUT" else a for a in argv]
    assert "unrecognized arguments" in _error(argv, capsys)
    assert not (tmp_path / "t.onnx").exists()


def test_a_pytorch_file_is_told_to_export_to_onnx_first(capsys, tmp_path):
    pth = tmp_path / "weights.pth"
    pth.write_bytes(pickle.dumps({"w": [1.0, 2.0]}, protocol=2))  # torch.save's legacy format: a pickle
    named = tmp_path / "model.bin"
    named.write_bytes(b"\x08\x01garbage that is no protobuf")
    for path in (pth, named):
        for cmd in ("info", "scan"):
            err = _error([cmd, str(path)], capsys)
            assert "PyTorch file" in err and "export it to ONNX first" in err and "torch.onnx.export(" in err


@pytest.mark.torch
def test_a_torch_save_checkpoint_is_told_to_export(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    pt = tmp_path / "model.pt"
    torch.save(torch.nn.Linear(2, 2).state_dict(), pt)  # a zip archive
    err = _error(["info", str(pt)], capsys)
    assert "a PyTorch file (a zip archive)" in err and "torch.onnx.export(" in err


def test_render_says_what_it_wrote(capsys, tmp_path):
    out = tmp_path / "g.svg"
    assert main(["render", str(MODEL), "-o", str(out)]) == 0
    said = capsys.readouterr().out.strip()
    assert said.startswith(f"wrote {out} (") and " px, " in said and out.is_file()


def test_sizes_are_written_in_binary_units_everywhere():
    from fuseview.runtime.costs import MeasuredCost
    from fuseview.units import format_bytes

    assert format_bytes(3 << 20) == "3.0 MiB"
    cost = MeasuredCost(30.0, 0.1, 2, 2, traffic_bytes=5 << 20, traffic_us=12.0, peak_gbps=20.0)
    assert "5.0 MiB of memory traffic" in cost.gain_text()


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_sweep_makes_its_folder_and_fills_every_column(capsys, tmp_path):
    """docs/ray.md's example: -o names a folder not there yet; each row has its verdict and ×accept-all."""
    out = tmp_path / "new" / "dir"
    model = ROOT / "assets" / "models" / "convnet_bn_relu_ts17.onnx"
    assert main(["sweep", str(model), "-o", str(out), "--budget", "5", "--runs", "8", "--threads", "1",
                 "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head, row = lines[0].split(), lines[1]
    assert "verdict" in head and (out / "sweep.json").is_file()
    words = ("faster", "slower", "no difference", "cannot tell")
    assert " - " not in f" {row} " and any(w in row for w in words)
