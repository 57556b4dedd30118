"""fuseview: see an ONNX graph, choose its kernel fusions one by one, and prove each one."""

from importlib import resources
from pathlib import Path

__version__ = "0.1.0"

# Shipped inside the package (fuseview/data), so a plain or wheel install finds it as well as a checkout.
DEMO_MODEL = Path(str(resources.files("fuseview") / "data" / "demo_gpt2_2l.onnx"))
