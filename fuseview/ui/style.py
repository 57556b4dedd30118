"""Colours and fonts of the graph drawing: one colour family per op category."""

from __future__ import annotations

from functools import lru_cache

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont

from fuseview.colors import HIGHLIGHT, PALETTE, SELECTION

__all__ = ["HIGHLIGHT", "PALETTE", "SELECTION", "colors", "font", "op_category"]

_CATEGORIES: dict[str, tuple[str, ...]] = {
    "linear": (
        "MatMul",
        "Gemm",
        "Conv",
        "ConvTranspose",
        "MatMulInteger",
        "QLinearMatMul",
        "QLinearConv",
        "ConvInteger",
        "Einsum",
        "FusedMatMul",
        "FusedGemm",
        "FusedConv",
        "Attention",
        "MultiHeadAttention",
        "GroupQueryAttention",
        "DeformConv",
    ),
    "norm": (
        "LayerNormalization",
        "BatchNormalization",
        "InstanceNormalization",
        "GroupNormalization",
        "LpNormalization",
        "MeanVarianceNormalization",
        "SkipLayerNormalization",
        "RMSNormalization",
        "SimplifiedLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "LRN",
    ),
    "activation": (
        "Relu",
        "LeakyRelu",
        "PRelu",
        "Elu",
        "Selu",
        "Celu",
        "Gelu",
        "FastGelu",
        "BiasGelu",
        "QuickGelu",
        "Sigmoid",
        "HardSigmoid",
        "HardSwish",
        "Tanh",
        "Softmax",
        "LogSoftmax",
        "Softplus",
        "Softsign",
        "Erf",
        "Mish",
        "ThresholdedRelu",
        "Clip",
        "Hardmax",
        "Swish",
    ),
    "elementwise": (
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Sqrt",
        "Exp",
        "Log",
        "Neg",
        "Abs",
        "Reciprocal",
        "Min",
        "Max",
        "Sum",
        "Mean",
        "Floor",
        "Ceil",
        "Round",
        "Sign",
        "Mod",
        "And",
        "Or",
        "Xor",
        "Not",
        "Equal",
        "Less",
        "Greater",
        "LessOrEqual",
        "GreaterOrEqual",
        "Where",
        "Cast",
        "CastLike",
        "IsNaN",
        "IsInf",
        "BitShift",
        "Sin",
        "Cos",
        "Tan",
        "Asin",
        "Acos",
        "Atan",
        "Sinh",
        "Cosh",
        "Asinh",
        "Acosh",
        "Atanh",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "BitwiseNot",
    ),
    "reduce": (
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceSumSquare",
        "ArgMax",
        "ArgMin",
        "TopK",
        "CumSum",
    ),
    "pool": (
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "GlobalLpPool",
        "LpPool",
        "MaxRoiPool",
        "RoiAlign",
        "MaxUnpool",
        "Resize",
        "Upsample",
        "GridSample",
    ),
    "shape": (
        "Reshape",
        "Transpose",
        "Concat",
        "Split",
        "Slice",
        "Gather",
        "GatherElements",
        "GatherND",
        "Scatter",
        "ScatterElements",
        "ScatterND",
        "Shape",
        "Size",
        "Unsqueeze",
        "Squeeze",
        "Flatten",
        "Expand",
        "Tile",
        "Pad",
        "Range",
        "ConstantOfShape",
        "Identity",
        "DepthToSpace",
        "SpaceToDepth",
        "NonZero",
        "OneHot",
        "Trilu",
        "EyeLike",
        "Compress",
        "ReverseSequence",
        "SplitToSequence",
        "ConcatFromSequence",
        "SequenceAt",
        "SequenceConstruct",
        "SequenceEmpty",
        "SequenceInsert",
        "SequenceErase",
        "SequenceLength",
        "Unique",
    ),
    "constant": ("Constant",),
    "control": ("If", "Loop", "Scan"),
    "quant": ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"),
}
_OP_CATEGORY = {op: cat for cat, ops in _CATEGORIES.items() for op in ops}

# the op-family colours and the selection marks live in fuseview.colors (no Qt), beside the rule colours
BACKGROUND = "#f7f8fa"
EDGE = "#8d96a3"
EDGE_ACTIVE = "#e07b00"
FRAME_BORDER = "#9fb3cc"
FRAME_FILL = QColor(61, 90, 128, 14)
TEXT = "#1b2430"
SUBTEXT = "#5b6573"


def op_category(op_type: str, domain: str = "") -> str:
    """The colour family of an op: linear, norm, activation, elementwise, shape, ... or custom."""
    if domain not in ("", "ai.onnx"):
        return "custom"
    return _OP_CATEGORY.get(op_type, "other")


@lru_cache(maxsize=64)
def colors(category: str) -> tuple[QColor, QColor]:
    """(strong, pale) QColors of a category."""
    strong, pale = PALETTE.get(category, PALETTE["other"])
    return QColor(strong), QColor(pale)


@lru_cache(maxsize=64)
def font(pixels: int, bold: bool = False) -> QFont:
    """The drawing font, sized in scene units (pixels, so screen, PNG and SVG agree)."""
    f = QFont("DejaVu Sans")
    f.setStyleHint(QFont.StyleHint.SansSerif)
    f.setPixelSize(pixels)
    f.setBold(bold)
    return f


def elide_words(text: str, metrics, width: float) -> str:
    """text cut at a word boundary with '…' so that it fits width (a QFontMetrics(F)); whole if it fits."""
    if metrics.horizontalAdvance(text) <= width:
        return text
    words = text.split(" ")
    while len(words) > 1:
        words.pop()
        cut = " ".join(words).rstrip(",;:·—(") + " …"
        if metrics.horizontalAdvance(cut) <= width:
            return cut
    return metrics.elidedText(text, Qt.TextElideMode.ElideRight, int(width))
