"""Text tables for the CLI (scan, profile, tune): each column as wide as its widest cell."""

from __future__ import annotations

from collections.abc import Sequence

from fuseview.textsafe import escape_controls


def text_width(cell: str) -> int:
    """Characters a cell takes once printed (control characters print as escapes)."""
    if cell.isprintable():  # no control character (each is unprintable): a scan's table has ~16,000 cells
        return len(cell)
    return len(escape_controls(cell, keep=""))


def table_lines(
    rows: Sequence[Sequence[str]], align: str = "", header: Sequence[str] | None = None, indent: str = "  ",
    gap: str = "  ",
) -> list[str]:
    """Rows (and a header row) as lines: align[i] is 'r' (right) or 'l' (left, the default) for column i;
    the last column is not padded, so no line ends in spaces. Rows may be shorter than the header."""
    body = [list(r) for r in ([header] if header is not None else []) + list(rows)]
    if not body:
        return []
    ncols = max(len(r) for r in body)
    cell_widths = [[text_width(c) for c in r] for r in body]  # measured once, for the widths and the pads
    widths = [max((w[i] for w in cell_widths if i < len(w)), default=0) for i in range(ncols)]
    lines = []
    for r, rw in zip(body, cell_widths, strict=True):
        cells = []
        for i, cell in enumerate(r):
            pad = " " * (widths[i] - rw[i])
            last = i == len(r) - 1
            if i < len(align) and align[i] == "r":
                cells.append(pad + cell)
            else:
                cells.append(cell if last else cell + pad)
        lines.append((indent + gap.join(cells)).rstrip())
    return lines
