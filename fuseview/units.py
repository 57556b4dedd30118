"""How fuseview writes a time or a size for people: one function each, used by the CLI and the window."""

from __future__ import annotations

_BINARY = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def format_us(us: float | None, micro: str = "us") -> str:
    """'1.23 ms' from 1000 us, else '12.3 us' (micro: the unit's spelling, 'µs' in plots); '-' for None."""
    if us is None:
        return "-"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} {micro}"


def format_bytes(n: float | None) -> str:
    """'1.5 MiB', '12.0 KiB', '100 B' (powers of 1024, the one spelling of the CLI and the window);
    '?' when unknown."""
    if n is None:
        return "?"
    for unit, size in _BINARY:
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"
