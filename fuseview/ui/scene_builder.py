"""Builds a big scene a slice at a time, the event loop running in between, then calls what waits on it."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

from fuseview.ui.graph_scene import GraphScene
from fuseview.ui.graph_view import GraphView

BUILD_SLICE_S = 0.03


class SceneBuilder(QObject):
    """Fills one scene at a time; a newer scene replaces the one being built (whose done() is dropped)."""

    def __init__(self, view: GraphView, on_error: Callable[[str, BaseException], object],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.view = view
        self.on_error = on_error
        self.scene: GraphScene | None = None
        self._done: Callable[[], None] | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self._step)

    def build(self, scene: GraphScene, done: Callable[[], None]) -> None:
        """Build scene (already in the view) and then call done(); at once when it is built already."""
        self._timer.stop()  # a scene still being built was replaced: its done() never runs
        self.scene = scene
        self._done = done
        if not scene.building:
            self._step()
            return
        # Built across event-loop turns: the window keeps painting (the visible part fills in first)
        # instead of freezing for the whole build.
        self._timer.start()

    def _step(self) -> None:
        scene = self.scene
        try:
            if scene is not None and scene.building:
                # the turn after the last slice runs before done(): Qt's queued polish of the last items
                # happens while no worker (the fusion scan starts on document_shown) competes for the GIL
                scene.build_some(BUILD_SLICE_S)
                return
            self._timer.stop()
            if scene is not None:
                scene.items(self.view.visible_scene_rect())  # brings Qt's item index up to date now, too
            done, self._done = self._done, None
            if done is not None:
                done()
        except Exception as exc:  # noqa: BLE001 - a drawing failure must not take the window down
            self._timer.stop()
            self._done = None
            self.on_error("Cannot show the model", exc)
