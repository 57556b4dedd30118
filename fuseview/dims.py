"""The one dims policy of scan, fuse, profile and the window: what a declared input dim is, and its value.

A declared dim is a number (fixed), a named symbol (`seq`), or unknown: no name, a name that says nothing
(`?`, blanks, onnx's own `unk__N`), or a value of -1 or 0 (as PaddlePaddle and some converters write "any
size"); each unknown is its own dim, so `[-1, 3, "?", "?"]` has three. Every non-fixed dim has a key: its
symbol's name, or `INPUT:AXIS` when it has none. The user sets dims with one syntax everywhere,
`--dim KEY=VALUE` (`--dim seq=64`, `--dim image:0=2`), and only for the model's top-level inputs (If/Loop/Scan
bodies take their shapes from the outer graph); dims left unset take a default by what their name looks like
(batch-like 1, sequence-like 128, a KV cache's past length 1, anything else 1). An unknown key is an error
that lists the valid ones.

A decoder with a KV cache runs with no --dim at all: every past tensor's length is one value (even when the
exporter gave each its own symbol) and the attention mask's length, when it has a symbol of its own, is
past + new tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import onnx

from fuseview.errors import FuseviewError
from fuseview.textsafe import shorten

BATCH_DEFAULT = 1
SEQUENCE_DEFAULT = 128
PAST_DEFAULT = 1  # one cached token: the past inputs and the Concat with them are exercised
OTHER_DEFAULT = 1
MAX_DIM = 2**31 - 1  # onnxruntime's dims are int64, but no tensor is longer than this on one axis

Dim = int | str | None  # a fixed size, a symbol's name, or unknown

_BATCH_WORDS = ("batch",)
_BATCH_NAMES = {"n", "b", "bs", "num_batches"}
_SEQUENCE_WORDS = ("seq", "len", "token", "time", "step")
_SEQUENCE_NAMES = {"s", "t", "l"}
_PAST_WORDS = ("past", "cache")
_PAST_INPUT_WORDS = ("past", "cache", "pkv")
_UNKNOWN_NAME = re.compile(r"\?*|unk__\d+")


def declared_dim(d: onnx.TensorShapeProto.Dimension) -> Dim:
    """A declared dim as fuseview reads it: a positive number, a symbol's name, or None (unknown)."""
    if d.HasField("dim_value") and d.dim_value > 0:
        return int(d.dim_value)
    if d.HasField("dim_param") and not _UNKNOWN_NAME.fullmatch(d.dim_param.strip()):
        return d.dim_param
    return None  # unnamed, "?", unk__N, or -1 / 0 ("any size" in some exporters)


def dim_key(input_name: str, axis: int, dim: Dim) -> str:
    """How the user names a non-fixed dim: the symbol's name, or INPUT:AXIS for an unnamed one."""
    return dim if isinstance(dim, str) else f"{input_name}:{axis}"


def dim_kind(key: str) -> str:
    """What a dim's key says it is: "batch", "past", "sequence", "unnamed" (INPUT:AXIS) or "other"."""
    if re.fullmatch(r".+:\d+", key):
        return "unnamed"
    low = key.lower()
    if any(w in low for w in _BATCH_WORDS) or low in _BATCH_NAMES:
        return "batch"
    if any(w in low for w in _PAST_WORDS):
        return "past"
    if any(w in low for w in _SEQUENCE_WORDS) or low in _SEQUENCE_NAMES:
        return "sequence"
    return "other"


def default_dim(key: str) -> int:
    """The value a dim gets when the user does not set it (batch-like 1, sequence-like 128, past 1, else 1).

    An unnamed dim (key INPUT:AXIS) says nothing about what it is, so it gets 1.
    """
    defaults = {"batch": BATCH_DEFAULT, "sequence": SEQUENCE_DEFAULT, "past": PAST_DEFAULT}
    return defaults.get(dim_kind(key), OTHER_DEFAULT)


def parse_dim_args(items: list[str] | None, label: str = "--dim") -> dict[str, int]:
    """`--dim KEY=VALUE` strings to a dict; FuseviewError on a malformed one (the model is checked later)."""
    out: dict[str, int] = {}
    for item in items or []:
        key, sep, value = str(item).rpartition("=")
        key = key.strip()
        if not sep or not key or any(c.isspace() for c in key):
            raise FuseviewError(
                f"{label} {item!r}: expected NAME=VALUE for a named dim (--dim seq=64)"
                " or INPUT:AXIS=VALUE for an unnamed one (--dim pixel_values:0=2)"
            )
        if not re.fullmatch(r"\s*\+?\d+\s*", value):
            raise FuseviewError(f"{label} {item!r}: VALUE must be a whole number of at least 1")
        if len(value.strip()) > 12:  # int() of a 100,000-digit string is itself slow
            raise FuseviewError(f"{label} {shorten(item, 60)!r}: VALUE must be at most {MAX_DIM}")
        v = int(value)
        if v < 1:
            raise FuseviewError(f"{label} {item!r}: VALUE must be at least 1")
        if v > MAX_DIM:
            raise FuseviewError(f"{label} {item!r}: VALUE must be at most {MAX_DIM}")
        out[key] = v
    return out


def parse_dim_text(text: str) -> dict[str, int]:
    """'seq=128, batch=2' (a text box's form) to a dict, with the same rules as --dim."""
    return parse_dim_args([p for p in text.replace(",", " ").split() if p], label="dims:")


@dataclass(frozen=True)
class DimSlot:
    """One non-fixed dim of a graph input: which input and axis, and its key."""

    input: str
    axis: int
    key: str


def dim_slots(model: onnx.ModelProto) -> list[DimSlot]:
    """Every non-fixed dim of the inputs a caller feeds (initializers excluded), in declaration order."""
    inits = {t.name for t in model.graph.initializer}
    slots = []
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        for axis, d in enumerate(tt.shape.dim):
            dim = declared_dim(d)
            if not isinstance(dim, int):
                slots.append(DimSlot(vi.name, axis, dim_key(vi.name, axis, dim)))
    return slots


def dim_keys(model: onnx.ModelProto) -> list[str]:
    """The keys `--dim` accepts for this model, in declaration order."""
    return list(dict.fromkeys(s.key for s in dim_slots(model)))


def check_dim_names(model: onnx.ModelProto, dims: dict[str, int] | None) -> None:
    """FuseviewError naming the first key the model lacks, with the keys it has."""
    keys = dim_keys(model)
    unknown = [k for k in (dims or {}) if k not in keys]
    if unknown:
        valid = ", ".join(keys) if keys else "none: every input dim is fixed"
        raise FuseviewError(f"--dim {unknown[0]}: the model has no such input dim (valid: {valid})")


@dataclass(frozen=True)
class CacheDims:
    """The dims a KV-cache decoder ties together: the past lengths (one value), the new-token dim, and the
    total lengths (past + new) of masks that carry a symbol of their own."""

    past: tuple[str, ...]
    new: str | None
    total: tuple[str, ...]


def cache_dims(model: onnx.ModelProto) -> CacheDims | None:
    """The KV-cache relations of a decoder's inputs, or None for a model without past inputs."""
    slots = dim_slots(model)
    past = [s.key for s in slots if any(w in s.input.lower() for w in _PAST_INPUT_WORDS)
            and dim_kind(s.key) != "batch"]
    if not past:
        return None
    past_set = set(past)
    ids = [s for s in slots if s.key not in past_set and dim_kind(s.key) != "batch"
           and "mask" not in s.input.lower() and "position" not in s.input.lower()]
    new = next((s.key for s in ids if "ids" in s.input.lower() or "embeds" in s.input.lower()),
               ids[0].key if ids else None)
    total = [s.key for s in slots if s.key not in past_set and s.key != new and dim_kind(s.key) != "batch"
             and ("mask" in s.input.lower() or "total" in s.key.lower())]
    return CacheDims(tuple(dict.fromkeys(past)), new, tuple(dict.fromkeys(total)))


def resolve_dims(model: onnx.ModelProto, dims: dict[str, int] | None = None) -> dict[str, int]:
    """Every non-fixed input dim's key with the value used: the user's, else the default (for a KV-cache
    decoder: one past length for every past input, masks of their own length at past + new)."""
    dims = dict(dims or {})
    check_dim_names(model, dims)
    used = {k: int(dims[k]) if k in dims else default_dim(k) for k in dim_keys(model)}
    cache = cache_dims(model)
    if cache is None:
        return used
    given = [dims[k] for k in cache.past if k in dims]
    past = int(given[0]) if given else PAST_DEFAULT
    for k in cache.past:
        used[k] = int(dims.get(k, past))
    new = used[cache.new] if cache.new else 0
    for k in cache.total:
        if k not in dims:
            used[k] = past + new
    return used
