"""fuseview: see an ONNX graph, choose its kernel fusions one by one, and prove each one."""

from pathlib import Path

__version__ = "0.1.0"

ASSETS = Path(__file__).resolve().parent.parent / "assets"
DEMO_MODEL = ASSETS / "demo_gpt2_2l.onnx"
