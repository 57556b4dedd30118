"""The graph's layout as SVG text without Qt: what `render -o g.svg` writes where Qt cannot start.

Qt's libraries load glib, libGL and X11 even for the offscreen platform, and a bare server has none of
them. This drawing has the window's layout (the same boxes, frames and routes from graph.layout), its
labels and its colours by kind; the op-family colours and the fusion marks need the window's scene.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from fuseview.colors import PALETTE
from fuseview.graph.geometry import Layout  # the layout only: the drawing needs nothing of the window

BACKGROUND = "#f7f8fa"  # the window's (ui.style), repeated: this module imports no Qt
EDGE = "#8d96a3"
TEXT = "#1b2430"
SUBTEXT = "#5b6573"
FRAME = "#9fb3cc"
MARGIN = 3.0


def _label(text: str, limit: int = 40) -> str:
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")


def layout_svg(layout: Layout, scale: float = 1.0) -> str:
    """The SVG document of a layout, `scale` pixels per layout unit."""
    w, h = max(layout.width, 1.0) + 2 * MARGIN, max(layout.height, 1.0) + 2 * MARGIN
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w * scale:.0f}" height="{h * scale:.0f}"'
        f' viewBox="{-MARGIN:g} {-MARGIN:g} {w:.1f} {h:.1f}" font-family="sans-serif">',
        f'<rect x="{-MARGIN:g}" y="{-MARGIN:g}" width="{w:.1f}" height="{h:.1f}" fill="{BACKGROUND}"/>',
    ]
    for f in layout.frames:
        out.append(f'<rect x="{f.x:.1f}" y="{f.y:.1f}" width="{f.w:.1f}" height="{f.h:.1f}" rx="6"'
                   f' fill="none" stroke="{FRAME}"/>')
        out.append(f'<text x="{f.x + 6:.1f}" y="{f.y + 13:.1f}" font-size="10" fill="{SUBTEXT}">'
                   f'{_label(f.label)}</text>')
    for r in layout.routes:
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in r.points)
        dash = ' stroke-dasharray="3 2"' if r.stub else ""
        out.append(f'<polyline points="{points}" fill="none" stroke="{EDGE}"{dash}>'
                   f'<title>{escape(r.tensor)}</title></polyline>')
    for b in layout.boxes:
        strong, pale = PALETTE.get(b.kind if b.kind != "node" else "other", PALETTE["other"])
        text = "#ffffff" if b.kind in ("input", "output") else TEXT
        cx = b.x + b.w / 2
        out.append(f'<g><title>{escape(b.label)}</title>'
                   f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="4"'
                   f' fill="{pale}" stroke={quoteattr(strong)}/>'
                   f'<text x="{cx:.1f}" y="{b.y + b.h / 2 - (2 if b.sublabel else -4):.1f}" font-size="11"'
                   f' text-anchor="middle" fill="{text}">{_label(b.label)}</text>')
        if b.sublabel:
            out.append(f'<text x="{cx:.1f}" y="{b.y + b.h / 2 + 11:.1f}" font-size="9" text-anchor="middle"'
                       f' fill="{SUBTEXT if text == TEXT else text}">{_label(b.sublabel)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
