"""The drawing's colours as hex strings (no Qt): op families, selection marks, and the rule colours.

Rule colours are one designed set (RULE_PALETTE, picked by scripts/pick_rule_colors.py): any two of them,
and each from the op-family, selection, highlight, focus, group and mixed-group colours, are at least
MIN_DISTANCE apart in CIEDE2000. A model's rules take colours from it as a set (assign_rule_colors): each
its own slot while the model has no more rules than the palette has colours, so no two look alike.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from functools import lru_cache

# op families: (strong colour: stripe and border, pale colour: box fill)
PALETTE: dict[str, tuple[str, str]] = {
    "linear": ("#2f6db5", "#dbe8f8"),
    "norm": ("#7b4fb3", "#ebe0f7"),
    "activation": ("#d0611d", "#fbe4d3"),
    "elementwise": ("#3a8f4b", "#dcf0df"),
    "reduce": ("#168a8a", "#d5eeee"),
    "pool": ("#2a93c4", "#d8eef8"),
    "shape": ("#6f7782", "#eceef1"),
    "constant": ("#9a8a4a", "#f4efdc"),
    "control": ("#8a5a2b", "#f1e4d6"),
    "quant": ("#b08a00", "#fbf1cc"),
    "custom": ("#c2307a", "#fadbea"),
    "other": ("#55606e", "#e6e9ee"),
    "input": ("#1f2d3d", "#34495e"),
    "output": ("#1f2d3d", "#34495e"),
    "group": ("#3d5a80", "#e3eaf3"),
}
SELECTION = "#ff9800"
HIGHLIGHT = "#ffd400"
FOCUS = "#111827"
# a collapsed group holding candidates of several rules: a neutral dashed outline with the rules' swatches
MIXED_RULES = "#8d939b"
# what a rule colour must never be mistaken for
RESERVED = tuple(
    sorted({strong for strong, _pale in PALETTE.values()} | {PALETTE["group"][1], SELECTION, HIGHLIGHT, FOCUS,
                                                             MIXED_RULES})
)
# least CIEDE2000 difference between two rule colours, and from a reserved colour (about 2 is "just
# noticeable"; 20 is told apart at a glance, on a 2-px outline too)
MIN_DISTANCE = 20.0
# lightness range of a rule colour: readable as an outline and a tint on the pale boxes, and none so dark
# that a small swatch reads as black
LIGHTNESS = (32.0, 80.0)
# 11 colours, the most that keep MIN_DISTANCE within LIGHTNESS from each other and from RESERVED on a
# 16-level sRGB grid (scripts/pick_rule_colors.py searches it; tests/test_colors.py checks the distances);
# the most rules one of the committed or GPT-2 48-layer models has is 9
RULE_PALETTE = (
    "#00dd99", "#ff0044", "#555500", "#ccaaee", "#ccaa99", "#00ccdd",
    "#ee00ff", "#883333", "#99cc00", "#225544", "#ff77aa",
)


@lru_cache(maxsize=4096)
def lab(hex_color: str) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB hex colour."""
    rgb = [int(hex_color[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    fx, fy, fz = f(x), f(y), f(z)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def ciede2000(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """CIEDE2000 colour difference of two CIELAB colours (Sharma, Wu and Dalal 2005; kL = kC = kH = 1)."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    c_bar = (math.hypot(a1, b1) + math.hypot(a2, b2)) / 2
    g = 0.5 * (1 - math.sqrt(c_bar**7 / (c_bar**7 + 25.0**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = math.hypot(a1p, b1), math.hypot(a2p, b2)
    h1p = math.degrees(math.atan2(b1, a1p)) % 360 if c1p else 0.0
    h2p = math.degrees(math.atan2(b2, a2p)) % 360 if c2p else 0.0
    dhp = 0.0
    if c1p * c2p:
        dhp = h2p - h1p
        dhp -= 360 if dhp > 180 else (-360 if dhp < -180 else 0)
    d_l, d_c = l2 - l1, c2p - c1p
    d_h = 2 * math.sqrt(c1p * c2p) * math.sin(math.radians(dhp / 2))
    l_bar, cp_bar = (l1 + l2) / 2, (c1p + c2p) / 2
    if c1p * c2p == 0:
        h_bar = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        h_bar = (h1p + h2p) / 2
    else:
        h_bar = (h1p + h2p + (360 if h1p + h2p < 360 else -360)) / 2
    t = (1 - 0.17 * math.cos(math.radians(h_bar - 30)) + 0.24 * math.cos(math.radians(2 * h_bar))
         + 0.32 * math.cos(math.radians(3 * h_bar + 6)) - 0.20 * math.cos(math.radians(4 * h_bar - 63)))
    d_theta = 30 * math.exp(-(((h_bar - 275) / 25) ** 2))
    r_c = 2 * math.sqrt(cp_bar**7 / (cp_bar**7 + 25.0**7))
    s_l = 1 + 0.015 * (l_bar - 50) ** 2 / math.sqrt(20 + (l_bar - 50) ** 2)
    s_c = 1 + 0.045 * cp_bar
    s_h = 1 + 0.015 * cp_bar * t
    r_t = -math.sin(math.radians(2 * d_theta)) * r_c
    return math.sqrt((d_l / s_l) ** 2 + (d_c / s_c) ** 2 + (d_h / s_h) ** 2 + r_t * (d_c / s_c) * (d_h / s_h))


def color_distance(a: str, b: str) -> float:
    """CIEDE2000 difference between two hex colours (larger: easier to tell apart)."""
    return ciede2000(lab(a), lab(b))


def rule_palette() -> tuple[str, ...]:
    """The colours rules take (also: one per kernel in the trace graph)."""
    return RULE_PALETTE


def rule_colors() -> tuple[str, ...]:
    """The colours rules take."""
    return RULE_PALETTE


def mixed_rules_color() -> str:
    """The neutral outline of a collapsed group holding candidates of several rules (no rule wears it)."""
    return MIXED_RULES


def _slot(rule: str, order: tuple[str, ...]) -> int:
    if rule in order:
        return order.index(rule) % len(RULE_PALETTE)
    return zlib.crc32(rule.encode()) % len(RULE_PALETTE)


@lru_cache(maxsize=256)
def rule_color(rule: str, order: tuple[str, ...] = ()) -> str:
    """A rule's own colour (its slot in `order`, the catalogue's, else a hash of its name): what it wears
    unless a rule before it in the same model holds that slot (assign_rule_colors)."""
    return RULE_PALETTE[_slot(rule, order)]


def assign_rule_colors(rules: Iterable[str], order: tuple[str, ...] = ()) -> dict[str, str]:
    """Colours for one model's rules as a set: each its own slot when free, else the next free one, so up to
    len(RULE_PALETTE) rules are pairwise MIN_DISTANCE apart (more rules than that repeat colours).

    order: the catalogue's rule names (fuseview.session.decisions.rule_order); colours sit below the rules."""
    ordered = sorted(set(rules), key=lambda r: (order.index(r) if r in order else len(order), r))
    taken: set[int] = set()
    out: dict[str, str] = {}
    n = len(RULE_PALETTE)
    for rule in ordered:
        slot = _slot(rule, order)
        if len(taken) < n:
            while slot in taken:
                slot = (slot + 1) % n
            taken.add(slot)
        out[rule] = RULE_PALETTE[slot]
    return out
