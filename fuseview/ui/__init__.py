"""Qt layer: the window and its panels. Calls graph/, fusion/ and runtime/; never edits a model itself."""

from fuseview.ui._none_refcount import make_none_immortal

make_none_immortal()  # before any Qt call: see _none_refcount for the PySide6 6.12 / CPython 3.11 bug
