"""A small legend floating in a graph view's corner: rule colours with counts, or a heat-map scale."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QWidget

from fuseview.ui.graph_scene import heat_color

_STYLE = (
    "QLabel { background: rgba(255,255,255,232); border: 1px solid #c9d2dd; border-radius: 6px;"
    " padding: 6px 8px; color: #1b2430; font-size: 11px; }"
)


class Legend(QLabel):
    """Rule -> colour and count (candidates) and/or a colour scale (heat map), top-right of a view."""

    def __init__(self, host: QWidget):
        super().__init__(host)
        self.setStyleSheet(_STYLE)
        self.setTextFormat(Qt.TextFormat.RichText)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents, True)
        self.rules: list[tuple[str, str, int]] = []
        self.scale: tuple[str, str, str] | None = None
        host.installEventFilter(self)
        self.hide()

    def set_rules(self, rules: list[tuple[str, str, int]]) -> None:
        """Entries (rule, colour, count); [] removes the rule part."""
        self.rules = list(rules)
        self._render()

    def set_scale(self, title: str | None, low: str = "0", high: str = "max") -> None:
        """A heat-map colour scale titled title (None removes it)."""
        self.scale = None if title is None else (title, low, high)
        self._render()

    def _render(self) -> None:
        parts = []
        if self.rules:
            rows = "".join(
                f"<tr><td><span style='color:{c}; font-size:14px'>■</span></td>"
                f"<td>{escape(r)}</td><td align='right'>&nbsp;{n}</td></tr>"
                for r, c, n in self.rules
            )
            parts.append(f"<b>Candidates</b><table cellspacing='0' cellpadding='1'>{rows}</table>")
        if self.scale is not None:
            title, low, high = self.scale
            cells = "".join(
                f"<td style='background:{heat_color(i / 9).name()}'>&nbsp;&nbsp;&nbsp;</td>"
                for i in range(10)
            )
            parts.append(
                f"<b>{escape(title)}</b><table cellspacing='0' cellpadding='0'><tr>{cells}</tr></table>"
                f"<table width='100%'><tr><td>{escape(low)}</td>"
                f"<td align='right'>{escape(high)}</td></tr></table>"
            )
        if not parts:
            self.hide()
            return
        self.setText("<br>".join(parts))
        self.adjustSize()
        self._place()
        self.show()
        self.raise_()

    def _place(self) -> None:
        host = self.parentWidget()
        if host is not None:
            # a scroll area's viewport scrolls its children with the picture: float over it instead
            vp = host.viewport() if hasattr(host, "viewport") else host
            self.move(max(4, vp.x() + vp.width() - self.width() - 12), vp.y() + 8)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt API
        if obj is self.parentWidget() and event.type() == QEvent.Type.Resize:
            self._place()
        return False

    def plain_text(self) -> str:
        """The legend's entries as text (tests, accessibility)."""
        lines = [f"{r} {n}" for r, _c, n in self.rules]
        if self.scale is not None:
            lines.append(f"{self.scale[0]} {self.scale[1]}..{self.scale[2]}")
        return "\n".join(lines)
