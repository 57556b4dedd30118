"""The drawing's colours as hex strings (no Qt): op families, selection marks, and one colour per rule.

A rule's colour comes from its name alone (its place in the rule order the caller passes, the catalogue's,
else a hash of the name), so it is the same in every model, and it is picked far (in CIELAB) from the
op-family colours, the selection, highlight and focus marks, and from the other rules' colours.
"""

from __future__ import annotations

import colorsys
import zlib
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
# what a rule colour must never be mistaken for
RESERVED = tuple(sorted({strong for strong, _pale in PALETTE.values()} | {SELECTION, HIGHLIGHT, FOCUS}))
# least CIELAB distance of a rule colour from a reserved colour (about 2.3 is "just noticeable")
MIN_RESERVED_DISTANCE = 22.0
RULE_PALETTE_SIZE = 32  # the catalogue has 28 rules; each keeps a colour of its own (nearest pair 18 apart)


@lru_cache(maxsize=4096)
def _lab(hex_color: str) -> tuple[float, float, float]:
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


def color_distance(a: str, b: str) -> float:
    """CIE76 distance between two hex colours (larger: easier to tell apart)."""
    la, lb = _lab(a), _lab(b)
    return sum((p - q) ** 2 for p, q in zip(la, lb, strict=True)) ** 0.5


def _hex(h: float, s: float, v: float) -> str:
    r, g, b = colorsys.hsv_to_rgb(h, s, v)
    return "#{:02x}{:02x}{:02x}".format(*(round(c * 255) for c in (r, g, b)))


@lru_cache(maxsize=1)
def rule_palette() -> tuple[str, ...]:
    """Colours for rules, each as far as can be from the reserved colours and from those before it."""
    grid = [_hex(h / 72, s, v) for h in range(72) for s in (0.55, 0.8, 1.0) for v in (0.5, 0.7, 0.9)]
    free = [c for c in grid if min(color_distance(c, r) for r in RESERVED) >= MIN_RESERVED_DISTANCE]
    # readable as a tint on the pale boxes: neither washed out nor almost black
    free = [c for c in free if 30 <= _lab(c)[0] <= 75]
    # greedy farthest point: each next colour is the one farthest from all chosen so far (one extra at the
    # end marks collapsed groups that hold candidates of several rules)
    nearest = {c: min(color_distance(c, r) for r in RESERVED) for c in free}
    chosen = [max(free, key=nearest.__getitem__)]
    nearest = {c: float("inf") for c in free}
    while len(chosen) < RULE_PALETTE_SIZE + 1:
        for c in free:
            nearest[c] = min(nearest[c], color_distance(c, chosen[-1]))
        chosen.append(max(free, key=nearest.__getitem__))
    return tuple(chosen)


def rule_colors() -> tuple[str, ...]:
    """The colours rules take."""
    return rule_palette()[:RULE_PALETTE_SIZE]


def mixed_rules_color() -> str:
    """The colour of a collapsed group holding candidates of several rules (no rule wears it)."""
    return rule_palette()[RULE_PALETTE_SIZE]


@lru_cache(maxsize=256)
def rule_color(rule: str, order: tuple[str, ...] = ()) -> str:
    """The colour of a rule, the same in every model: its slot in `order` (the catalogue's), else a hash."""
    palette = rule_colors()
    names = order
    if rule in names and names.index(rule) < len(palette):
        return palette[names.index(rule)]
    return palette[zlib.crc32(rule.encode()) % len(palette)]
