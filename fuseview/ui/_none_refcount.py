"""Work around PySide6 6.12 on CPython < 3.12: each call of a Qt method returning void drops a
reference to None that it never took (None is immortal from 3.12 on, so the wheel assumes it). After
a few thousand calls (setPen, setZValue, ...) None's count reaches zero and CPython aborts with
"none_dealloc: deallocating None". Giving None a huge extra count makes it immortal in effect.
"""

from __future__ import annotations

import ctypes
import platform
import sys

_EXTRA = 1 << 52


def make_none_immortal() -> bool:
    """Raise None's reference count far past any number of leaked decrements; True if it was needed."""
    if sys.version_info >= (3, 12) or platform.python_implementation() != "CPython":
        return False
    if sys.getrefcount(None) > _EXTRA // 2:
        return False  # done already
    # ob_refcnt is the first field of every CPython object
    ctypes.c_ssize_t.from_address(id(None)).value += _EXTRA
    return True
