"""A legend floating over a graph view: rule colours with counts and/or a heat-map scale.

Its header collapses it to one line, dragging the header moves it, it takes the clicks that land on it
(never the hidden nodes below), and it steps aside from a node the view has just centred on. After a
resize, scroll or zoom it settles in the corner where it covers the fewest drawn boxes.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt, QTimer
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QFrame, QLabel, QToolButton, QVBoxLayout, QWidget

from fuseview.colors import MIXED_RULES
from fuseview.ui.graph_scene import heat_color
from fuseview.ui.scene_items import BoxItem

_STYLE = (
    "QFrame#legend { background: rgba(255,255,255,236); border: 1px solid #c9d2dd; border-radius: 6px; }"
    " QLabel { color: #1b2430; font-size: 11px; background: transparent; }"
    " QToolButton { border: none; font-weight: bold; font-size: 11px; color: #1b2430; text-align: left; }"
)
_MARGIN = 8
# the corners a legend may sit in, tried in this order when it must step aside
CORNERS = ("top-right", "top-left", "bottom-right", "bottom-left")


class _Header(QToolButton):
    """The legend's title: a click folds or unfolds the legend, a drag moves it."""

    def __init__(self, legend: Legend):
        super().__init__(legend)
        self.legend = legend
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.setCursor(Qt.CursorShape.OpenHandCursor)
        self._press: QPoint | None = None
        self._dragged = False

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        self._press = event.globalPosition().toPoint()
        self._origin = self.legend.pos()
        self._dragged = False
        event.accept()

    def mouseMoveEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        if self._press is None:
            return
        delta = event.globalPosition().toPoint() - self._press
        if self._dragged or delta.manhattanLength() > 4:
            self._dragged = True
            self.legend.move_to(self._origin + delta)
        event.accept()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        if self._press is not None and not self._dragged:
            self.legend.chosen = True  # the user's fold: settle no longer folds it for them
            self.legend.set_collapsed(not self.legend.collapsed)
        self._press = None
        event.accept()


class Legend(QFrame):
    """Rule -> colour and count and/or a colour scale (heat map), floating in a corner of a view."""

    def __init__(self, host: QWidget, title: str = "Candidates"):
        super().__init__(host)
        self.setObjectName("legend")
        self.setStyleSheet(_STYLE)
        self.title = title
        self.collapsed = False
        self.corner = "top-right"
        self.moved = False  # the user dragged it: it stays where it was put (kept inside the view)
        self.chosen = False  # the user folded or unfolded it: it stays so
        self.rules: list[tuple[str, str, int]] = []
        self.mixed_groups = 0  # collapsed groups drawn neutral: they hold candidates of several rules
        self.scale: tuple[str, str, str] | None = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 6)
        lay.setSpacing(2)
        self.header = _Header(self)
        self.header.setToolTip("Click to fold or unfold; drag to move")
        self.body = QLabel(self)
        self.body.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.header)
        lay.addWidget(self.body)
        host.installEventFilter(self)
        if hasattr(host, "centred_on"):  # a GraphView: step aside from what it has just centred on
            host.centred_on.connect(lambda rect: self.avoid(host.host_rect(rect)))
        self._settle_timer = QTimer(self)
        self._settle_timer.setSingleShot(True)
        self._settle_timer.setInterval(120)  # a drag or a wheel burst settles once, when it stops
        self._settle_timer.timeout.connect(self.settle)
        for bar in (getattr(host, "horizontalScrollBar", None), getattr(host, "verticalScrollBar", None)):
            if bar is not None:
                bar().valueChanged.connect(lambda _v: self._settle_timer.start())
        self.hide()

    # content -----------------------------------------------------------------------------------------
    def set_title(self, title: str) -> None:
        """The heading of the rule part (what the colours stand for in this pane)."""
        self.title = title
        self._render()

    def set_rules(self, rules: list[tuple[str, str, int]], mixed_groups: int = 0) -> None:
        """Entries (rule, colour, count), and how many groups are drawn neutral as holding several rules;
        [] removes the rule part."""
        self.rules = list(rules)
        self.mixed_groups = mixed_groups if rules else 0
        self._render()

    def set_scale(self, title: str | None, low: str = "0", high: str = "max") -> None:
        """A heat-map colour scale titled title (None removes it)."""
        self.scale = None if title is None else (title, low, high)
        self._render()

    def set_collapsed(self, collapsed: bool) -> None:
        """Fold the legend to its title line, or unfold it."""
        self.collapsed = collapsed
        self._render()

    def heading(self) -> str:
        """The header's text without the fold arrow."""
        if self.rules:
            return f"{self.title} ({sum(n for _r, _c, n in self.rules)})"
        return self.scale[0] if self.scale is not None else self.title

    def _render(self) -> None:
        parts = []
        if self.rules:
            rows = "".join(
                f"<tr><td><span style='color:{c}; font-size:14px'>■</span></td>"
                f"<td>{escape(r)}</td><td align='right'>&nbsp;{n}</td></tr>"
                for r, c, n in self.rules
            )
            if self.mixed_groups:
                rows += (  # drawn dashed grey, with a swatch per rule inside
                    f"<tr><td><span style='color:{MIXED_RULES}; font-size:14px'>▢</span></td>"
                    "<td><i>group of several rules</i></td>"
                    f"<td align='right'>&nbsp;{self.mixed_groups}</td></tr>"
                )
            parts.append(f"<table cellspacing='0' cellpadding='1'>{rows}</table>")
        if self.scale is not None:
            title, low, high = self.scale
            cells = "".join(
                f"<td style='background:{heat_color(i / 9).name()}'>&nbsp;&nbsp;&nbsp;</td>"
                for i in range(10)
            )
            heading = f"<b>{escape(title)}</b>" if self.rules else ""
            parts.append(
                f"{heading}<table cellspacing='0' cellpadding='0'><tr>{cells}</tr></table>"
                f"<table width='100%'><tr><td>{escape(low)}</td>"
                f"<td align='right'>{escape(high)}</td></tr></table>"
            )
        if not parts:
            self.hide()
            return
        self.header.setText(("▸ " if self.collapsed else "▾ ") + self.heading())
        self.body.setText("<br>".join(parts))
        self.body.setVisible(not self.collapsed)
        self.adjustSize()
        self._place()
        self.show()
        self._settle_timer.start()
        self.raise_()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt API
        event.accept()  # a click on the legend is the legend's, never a hidden node's below it

    # placement ---------------------------------------------------------------------------------------
    def _area(self) -> QRect:
        host = self.parentWidget()
        if host is None:
            return QRect()
        # a scroll area's viewport scrolls its children with the picture: float over it instead
        vp = host.viewport() if hasattr(host, "viewport") else host
        return QRect(vp.x(), vp.y(), vp.width(), vp.height())

    def corner_rect(self, corner: str) -> QRect:
        """Where the legend would sit in a corner of its view (host coordinates)."""
        area, w, h = self._area(), self.width(), self.height()
        x = area.right() - w - _MARGIN - 4 if corner.endswith("right") else area.x() + _MARGIN
        y = area.y() + _MARGIN if corner.startswith("top") else area.bottom() - h - _MARGIN
        return QRect(max(area.x(), x), max(area.y(), y), w, h)

    def _place(self) -> None:
        if self.moved:
            self.move_to(self.pos())
        else:
            self.move(self.corner_rect(self.corner).topLeft())

    def move_to(self, pos: QPoint) -> None:
        """Put the legend at pos (host coordinates), kept inside the view; it stays there after resizes."""
        area = self._area()
        x = min(max(pos.x(), area.x()), max(area.x(), area.right() - self.width()))
        y = min(max(pos.y(), area.y()), max(area.y(), area.bottom() - self.height()))
        self.moved = True
        self.move(x, y)

    def avoid(self, rect: QRect) -> None:
        """Step into another corner if the legend covers rect (host coordinates), e.g. a just-centred node."""
        if not self.isVisible() or not self.geometry().intersects(rect):
            return
        for corner in CORNERS:
            if not self.corner_rect(corner).intersects(rect):
                self.corner, self.moved = corner, False
                self._place()
                return
        self.set_collapsed(True)  # nowhere free: fold to one line

    def covered(self, corner: str) -> int:
        """How many drawn boxes of the view the legend would cover in that corner."""
        host = self.parentWidget()
        scene = host.scene() if host is not None and hasattr(host, "scene") else None
        if scene is None:
            return 0
        rect = self.corner_rect(corner).translated(-self._area().topLeft())  # viewport coordinates
        area = host.mapToScene(rect).boundingRect()
        return sum(1 for it in scene.items(area) if isinstance(it, BoxItem) and it.isVisible())

    def settle(self) -> None:
        """Sit in the corner covering the fewest boxes (the current one on a tie; a dragged legend stays);
        folded to its title line while it would cover boxes in every corner, unless the user unfolded it."""
        if self.moved or not self.isVisible():
            return
        counts = {c: self.covered(c) for c in CORNERS}
        best = min(CORNERS, key=lambda c: (counts[c], c != self.corner))
        if counts[best] < counts[self.corner]:
            self.corner = best
            self._place()
        if counts[best] > 0 and not self.collapsed and not self.chosen:
            self.set_collapsed(True)  # boxes under every corner: fold to its title line (a click unfolds)
            self.settle()

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt API
        if obj is self.parentWidget() and event.type() == QEvent.Type.Resize:
            self._place()
            self._settle_timer.start()
        return False

    def plain_text(self) -> str:
        """The legend's entries as text (tests, accessibility)."""
        lines = [f"{r} {n}" for r, _c, n in self.rules]
        if self.mixed_groups:
            lines.append(f"group of several rules {self.mixed_groups}")
        if self.scale is not None:
            lines.append(f"{self.scale[0]} {self.scale[1]}..{self.scale[2]}")
        return "\n".join(lines)
