"""One-call capture of a function eager and under torch.compile, with Inductor's provenance (needs torch).

torch is imported only when compare_compile runs, so `import fuseview.capture` stays cheap and torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - names only
    from fuseview.capture.compile import compare_compile as compare_compile


def __getattr__(name: str):
    if name == "compare_compile":
        from fuseview.capture.compile import compare_compile

        return compare_compile
    raise AttributeError(name)
