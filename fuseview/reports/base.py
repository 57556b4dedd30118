"""What every typed report shares: reading a JSON object into a dataclass, and writing it back in order."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, ClassVar, TypeVar

from fuseview.errors import FuseviewError

JSON = dict[str, Any]
REPORT_VERSION = 1  # carried by the in-memory kinds (info, scan, fuse) in their JSON


def known_fields(cls: type, data: object, kind: str) -> JSON:
    """data as keyword arguments of the dataclass cls: an object of its fields, nothing unknown."""
    if not isinstance(data, dict):
        raise FuseviewError(f"{kind} report: not a JSON object")
    names = {f.name for f in fields(cls)}
    extra = sorted(set(data) - names - {"kind", "report_version"})
    if extra:
        raise FuseviewError(f"{kind} report: unknown fields {', '.join(extra)}")
    missing = sorted(n for n in names if n not in data and _required(cls, n))
    if missing:
        raise FuseviewError(f"{kind} report: missing {', '.join(missing)}")
    return {k: v for k, v in data.items() if k in names}


def _required(cls: type, name: str) -> bool:
    f = next(f for f in fields(cls) if f.name == name)
    return f.default is MISSING and f.default_factory is MISSING


def split(data: JSON, typed: tuple[str, ...]) -> tuple[JSON, tuple[str, ...]]:
    """The keys of a (checked) object that its type does not name, and the order of all its keys."""
    return {k: v for k, v in data.items() if k not in typed}, tuple(data)


def ordered(known: JSON, extra: JSON, order: tuple[str, ...]) -> JSON:
    """The object of typed and extra keys, in the order it was read (new keys after, typed first), so
    that a report read and written again is the same text."""
    out: JSON = {}
    for key in order:
        if key in known:
            out[key] = known[key]
        elif key in extra:
            out[key] = extra[key]
    for part in (known, extra):
        for key, value in part.items():
            out.setdefault(key, value)
    return out


R = TypeVar("R", bound="FlatRecord")


class FlatRecord:
    """A dataclass record whose typed keys (TYPED, its first fields) hold plain JSON values, with the
    keys its type does not name (extra) and the order read (order): read and written by name."""

    TYPED: ClassVar[tuple[str, ...]] = ()
    extra: JSON
    order: tuple[str, ...]

    @classmethod
    def from_json(cls: type[R], d: JSON) -> R:
        """The record of a checked object."""
        extra, order = split(d, cls.TYPED)
        return cls(**{k: d[k] for k in cls.TYPED}, extra=extra, order=order)  # type: ignore[call-arg]

    def to_json(self) -> JSON:
        """As the report holds it."""
        return ordered({k: getattr(self, k) for k in self.TYPED}, self.extra, self.order)
