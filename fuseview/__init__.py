"""fuseview: see an ONNX graph, choose its kernel fusions one by one, and prove each one."""

from pathlib import Path

__version__ = "0.1.0"

# Shipped inside the package (fuseview/data), so a plain or wheel install finds it as well as a checkout.
# (beside this file: importlib.resources would cost 70 ms of every start for the same path)
DEMO_MODEL = Path(__file__).resolve().parent / "data" / "demo_gpt2_2l.onnx"
