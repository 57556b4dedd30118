"""Work around PySide6 6.12 on CPython < 3.12: Qt calls drop references to None, True and False that
they never took (those objects are immortal from 3.12 on, and the wheel assumes so). Each void method
(setPen, setZValue, ...) or signal emit costs one; after a few thousand CPython aborts with
"none_dealloc: deallocating None" or "bool_dealloc". Giving these singletons a huge extra count makes
them immortal in effect.
"""

from __future__ import annotations

import ctypes
import platform
import sys

_EXTRA = 1 << 52
_SINGLETONS = (None, True, False, NotImplemented, Ellipsis)


def make_none_immortal() -> bool:
    """Raise the singletons' reference counts past any number of leaked decrements; True if needed."""
    if sys.version_info >= (3, 12) or platform.python_implementation() != "CPython":
        return False
    if sys.getrefcount(None) > _EXTRA // 2:
        return False  # done already
    for obj in _SINGLETONS:
        # ob_refcnt is the first field of every CPython object
        ctypes.c_ssize_t.from_address(id(obj)).value += _EXTRA
    return True
