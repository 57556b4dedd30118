"""The candidates dock's first row: what the model is fused for, a view of the session's FusionSettings: the
provider the scan offers fused ops for (another one rescans) and float16 (the model's conversion shown)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QWidget

from fuseview.session import Session
from fuseview.session.fusion_target import PROVIDERS, FusionSettings
from fuseview.ui.flow_layout import FlowLayout, labelled

_TEXTS = {"any": "any provider", "auto": "auto", "cpu": "CPU", "cuda": "CUDA"}
_TIPS = {
    "any": "every fused op is offered, whichever provider has a kernel for it",
    "auto": "CUDA when this onnxruntime has CUDAExecutionProvider, else CPU (as `fuseview scan`)",
    "cpu": "only fused ops onnxruntime's CPU EP has a kernel for in the model's dtype (and not measured"
           " slower there); the others are near misses that say why",
    "cuda": "only fused ops the CUDA EP has a kernel for in the model's dtype (fuseview's kernel table: no"
            " GPU needed to scan); the others are near misses that name the alternative",
}


class FusionTargetBar(QWidget):
    """'Fuse for [provider]' and '[ ] float16': they edit the session's fusion settings and show them."""

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        row = FlowLayout(self, spacing=4)
        self.provider = QComboBox()
        for key in PROVIDERS:
            self.provider.addItem(_TEXTS[key], key)
            self.provider.setItemData(self.provider.count() - 1, _TIPS[key], Qt.ItemDataRole.ToolTipRole)
        self.provider.setToolTip("the execution provider the scan offers fused ops for; another one scans"
                                 " again, keeping the decisions of the candidates it still has")
        self.float16 = QCheckBox("float16")
        self.float16.setToolTip(
            "show, scan, apply, profile and tune the model's float16 conversion (onnxruntime's converter, I/O"
            " types kept, as `fuse --float16`): the fused model is checked at float16 tolerances beside the"
            " conversion's own difference from the float32 model")
        row.addWidget(labelled("Fuse for", self.provider))
        row.addWidget(self.float16)
        self.provider.currentIndexChanged.connect(
            lambda _i: self.session.set_fusion_settings(provider=self.provider.currentData()))
        self.float16.toggled.connect(lambda on: self.session.set_fusion_settings(float16=bool(on)))
        session.events.fusion_settings.connect(lambda e: self.show_settings(e.settings))
        self.show_settings(session.fusion_settings)

    def show_settings(self, settings: FusionSettings) -> None:
        """Show the session's settings (another view may have changed them)."""
        index = self.provider.findData(settings.provider)
        if index != self.provider.currentIndex():
            self.provider.setCurrentIndex(index)
        if self.float16.isChecked() != settings.float16:
            self.float16.setChecked(settings.float16)
