"""Symbolic dims compared while matching: a symbol binds to one value throughout."""

from __future__ import annotations

Dim = int | str | None  # a number, a symbol (dim_param or onnx's unk__N), or unknown


class Unifier:
    """Binds symbolic dims while comparing shapes: a symbol equals one value (number or symbol) throughout.

    Unknown (None) matches anything and binds nothing, so a dim a rule does not need never blocks it.
    """

    def __init__(self) -> None:
        self.bound: dict[str, Dim] = {}

    def _resolve(self, d: Dim) -> Dim:
        seen = 0
        while isinstance(d, str) and d in self.bound and seen < 64:
            d = self.bound[d]
            seen += 1
        return d

    def dim(self, a: Dim, b: Dim) -> bool:
        """Unify two dims; False only when they are provably different numbers (or bound so)."""
        a, b = self._resolve(a), self._resolve(b)
        if a is None or b is None or a == b:
            return True
        if isinstance(a, str):
            self.bound[a] = b
            return True
        if isinstance(b, str):
            self.bound[b] = a
            return True
        return False

    def shape(self, a: list | None, b: list | None) -> bool:
        """Unify two shapes of the same rank dim by dim (unknown rank matches)."""
        if a is None or b is None:
            return True
        return len(a) == len(b) and all(self.dim(x, y) for x, y in zip(a, b, strict=True))


def same_shape(a: list | None, b: list | None) -> bool:
    """True unless two shapes provably differ (symbols unify consistently, unknown matches)."""
    return Unifier().shape(a, b)
