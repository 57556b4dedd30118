"""The Target selector of the Profile dock and the Tune dialog: Local, or a Ray cluster's address (the ones
used before are remembered in QSettings), and the fingerprint of the machine a result was measured on.

A Ray target is reached in the job's worker thread (never the UI thread), where the measurement then waits
on the cluster; Cancel reaches the task through the job's progress (fuseview.targets.ray_target).
"""

from __future__ import annotations

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QWidget

from fuseview.session.exports import parse_target

LOCAL = "Local"
RECENT_KEY, LAST_KEY = "targets/recent", "targets/last"
MAX_RECENT = 8


def environment_text(env: dict | None) -> str:
    """One line on the machine a result was measured on: host, CPU, cores, memory, GPU, onnxruntime."""
    if not env:
        return ""
    target = env.get("target") or {}
    where = f"Ray node {target.get('hostname') or '?'}" if target.get("kind") == "ray" else "this machine"
    parts = [where, env.get("cpu") or ""]
    if env.get("cpu_cores"):
        parts.append(f"{env['cpu_cores']} cores")
    if env.get("memory_bytes"):
        parts.append(f"{env['memory_bytes'] / 2**30:.1f} GiB")
    if env.get("gpu"):
        parts.append(f"GPU {env['gpu']}")
    parts.append(f"onnxruntime {env.get('onnxruntime', '?')}")
    return "measured on " + " · ".join(p for p in parts if p)


class TargetSelector(QWidget):
    """An editable choice of Local or ray:ADDRESS, and the last result's machine beside it."""

    def __init__(self, parent: QWidget | None = None, settings: QSettings | None = None) -> None:
        super().__init__(parent)
        self.settings = settings if settings is not None else QSettings("fuseview", "fuseview")
        self.combo = QComboBox()
        self.combo.setEditable(True)
        self.combo.setToolTip("where the measurement runs: Local, or ray:ADDRESS of a Ray cluster"
                              " (ray:auto, ray:HOST:PORT, ray:ray://HOST:PORT; needs fuseview[ray])")
        self.combo.addItem(LOCAL)
        for spec in self._recent():
            self.combo.addItem(spec)
        last = str(self.settings.value(LAST_KEY, LOCAL) or LOCAL)
        self.combo.setCurrentText(last)
        self.where = QLabel("")
        self.where.setStyleSheet("color: #5b6573;")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.combo)
        lay.addWidget(self.where, 1)

    def _recent(self) -> list[str]:
        value = self.settings.value(RECENT_KEY, [])
        items = [value] if isinstance(value, str) else list(value or [])
        return [str(v) for v in items if str(v).startswith("ray:")][:MAX_RECENT]

    def spec(self) -> str:
        """The --target value chosen: "local" or "ray:ADDRESS" (FuseviewError for anything else)."""
        text = self.combo.currentText().strip()
        spec = "local" if text in ("", LOCAL, "local") else text
        parse_target(spec)
        return spec

    def remember(self) -> str:
        """The chosen target, kept as the last one (and a Ray address among the recent ones)."""
        spec = self.spec()
        self.settings.setValue(LAST_KEY, LOCAL if spec == "local" else spec)
        if spec != "local":
            recent = [spec, *(r for r in self._recent() if r != spec)][:MAX_RECENT]
            self.settings.setValue(RECENT_KEY, recent)
            if self.combo.findText(spec) < 0:
                self.combo.addItem(spec)
        return spec

    def show_environment(self, env: dict | None) -> None:
        """Show the fingerprint of the machine the shown result was measured on."""
        self.where.setText(environment_text(env))
