"""`fuseview info` on real models, in text and JSON."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import GPT2_MODELS


def test_info_json_matches_the_file(capsys) -> None:
    from fuseview.cli import main

    path = GPT2_MODELS / "gpt2_12l_ts17.onnx"
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    index = json.loads((GPT2_MODELS / "INDEX.json").read_text())["gpt2_12l_ts17"]
    assert info["nodes"] == index["nodes"]
    assert info["ops"] == index["ops"]
    assert info["opsets"] == {"": 17}
    assert [i["name"] for i in info["inputs"]] == ["input_ids", "attention_mask"]
    assert info["inputs"][0]["shape"] == ["batch", "seq"]
    assert info["outputs"][0]["dtype"] == "float32"


def test_info_text_and_module_entry_point() -> None:
    path = GPT2_MODELS / "gpt2_2l_ts17.onnx"
    out = subprocess.run(
        [sys.executable, "-m", "fuseview", "info", str(path)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "nodes      481" in out.stdout and "ai.onnx 17" in out.stdout


def test_unknown_subcommand_argument_is_usage_error(capsys) -> None:
    import pytest

    from fuseview.cli import main

    with pytest.raises(SystemExit) as e:
        main(["info"])
    assert e.value.code == 2


def test_closed_pipe_is_not_an_error() -> None:
    # `fuseview scan MODEL | head -1`: the reader leaves early; fuseview must not print an error
    cmd = [sys.executable, "-m", "fuseview", "scan", str(GPT2_MODELS / "gpt2_12l_ts17.onnx")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert first.startswith(b"model")
    assert "error" not in err and "Traceback" not in err
