"""The one check of the options the command line and the Python API share: names, types and bounds.

The CLI checks its parsed flags here (`check_values`) and each API function its keywords (`api_settings`),
so `fuseview.tune(sessions=10**5)` is refused with the line `--sessions 100000: must be from 1 to 100`
that `fuseview tune --sessions 100000` prints. The API takes its keywords as the CLI spells its flags
(`budget=`, `inputs=`, `dim=`, `no_validate=`) as well as the settings' own field names.
No numpy/onnx import: the CLI's start-up reads this.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

from fuseview.defaults import OPT_LEVEL_NAMES, PROVIDER_CHOICES
from fuseview.errors import FuseviewError
from fuseview.textsafe import shorten


class OptionTypeError(FuseviewError, TypeError):
    """An option of the wrong type or an unknown keyword: a user message, and a TypeError to Python."""


# name -> (flag, lowest, highest): counts past these cost hours or gigabytes and say nothing more
NUMBER_BOUNDS: dict[str, tuple[str, float, float]] = {
    "runs": ("--runs", 1, 100_000),
    "warmup": ("--warmup", 0, 10_000),
    "profile_runs": ("--profile-runs", 1, 1_000),
    "sessions": ("--sessions", 1, 100),
    "max_batches": ("max_batches", 1, 100),
    "seeds": ("--seeds", 1, 1_000),
    "seed": ("--seed", 0, 2**32 - 1),  # numpy's seeds are unsigned
    "steps": ("--steps", 1, 10**9),
    "top": ("--top", 0, 100_000),
    "scale": ("--scale", 1e-3, 64.0),
    "threshold": ("--threshold", 0.0, 10.0),
    "atol": ("--atol", 0.0, 1e30),
    "rtol": ("--rtol", 0.0, 1e30),
    "target_opset": ("--target-opset", 1, 1_000),
    "budget": ("--budget", 0.0, 10**7),  # seconds; more than 0 (below), at most about four months
}
_INTEGERS = frozenset({"runs", "warmup", "profile_runs", "sessions", "max_batches", "seeds", "seed",
                       "steps", "top", "target_opset", "threads"})
_CHOICES: dict[str, tuple[str, tuple[str, ...]]] = {
    "provider": ("--provider", PROVIDER_CHOICES),
    "ort_opt": ("--ort-opt", OPT_LEVEL_NAMES),
    "attribution_opt": ("--attribution-opt", OPT_LEVEL_NAMES),
    "ort_optimizer": ("--ort-optimizer", ("auto", "off", "bert", "gpt2")),
}
_FLAGS_OF_SWITCHES = {"validate": "--no-validate", "keep_neutral": "--keep-neutral", "float16": "--float16",
                      "ort_fusions": "--ort-fusions", "strict": "strict",
                      "weights_on_disk": "weights_on_disk"}
_PATHS = {"inputs": "--inputs", "inputs_npz": "--inputs"}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def _shown(value: object) -> str:
    # one line whatever the object prints as (a ModelProto's str() is its whole text form)
    return shorten(repr(value) if isinstance(value, str) else " ".join(str(value).split()), 40)


def check_number(name: str, value: object) -> None:
    """FuseviewError unless value is a number of the option's type (no bool) within its bounds."""
    if name == "threads":
        check_threads(value)
        return
    flag, lo, hi = NUMBER_BOUNDS[name]
    integer = name in _INTEGERS
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        kind = "a whole number" if integer else "a number"
        raise OptionTypeError(f"{flag} {_shown(value)}: must be {kind}, not {type(value).__name__}")
    if name == "budget" and not (math.isfinite(value) and 0 < value <= hi):
        raise FuseviewError(f"--budget {_shown(value)}: must be a finite number of seconds, more than 0 and"
                            f" at most {_num(hi)}")
    if not math.isfinite(value):
        raise FuseviewError(f"{flag} {_shown(value)}: must be a finite number from {_num(lo)} to {_num(hi)}")
    if not lo <= value <= hi:
        raise FuseviewError(f"{flag} {_shown(value)}: must be from {_num(lo)} to {_num(hi)}")


def check_threads(value: object) -> None:
    """FuseviewError unless value is 0 (onnxruntime chooses) up to the number of CPUs."""
    cpus = os.cpu_count() or 1
    if isinstance(value, bool) or not isinstance(value, int):
        kind = type(value).__name__
        raise OptionTypeError(f"--threads {_shown(value)}: must be a whole number, not {kind}")
    if not 0 <= value <= cpus:
        raise FuseviewError(f"--threads {value}: must be 0 (onnxruntime chooses) to {cpus} (the CPUs)")


def check_values(values: Mapping[str, Any]) -> None:
    """Check every known option in values (the CLI's parsed flags; None means unset)."""
    for name, value in values.items():
        if value is None:
            continue
        if name in NUMBER_BOUNDS or name == "threads":
            check_number(name, value)
        elif name in _CHOICES:
            flag, choices = _CHOICES[name]
            if not isinstance(value, str) or value not in choices:
                raise FuseviewError(f"{flag} {_shown(value)}: must be one of {', '.join(choices)}")
        elif name in _FLAGS_OF_SWITCHES and not isinstance(value, bool):
            raise OptionTypeError(f"{_FLAGS_OF_SWITCHES[name]} {_shown(value)}: must be True or False")
        elif name in _PATHS and not isinstance(value, (str, os.PathLike)):
            raise OptionTypeError(f"{_PATHS[name]} {_shown(value)}: must be a file name")
        elif name == "dims":
            check_dims(value)


def check_dims(value: object) -> None:
    """FuseviewError unless value maps dim names to whole numbers from 1 to 2^31 - 1."""
    if not isinstance(value, Mapping):
        raise OptionTypeError(f"--dim {_shown(value)}: must map dim names to sizes ({{'seq': 64}})")
    for key, size in value.items():
        if not isinstance(key, str) or not key:
            raise OptionTypeError(f"--dim {_shown(key)}: a dim's name must be a non-empty string")
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 2**31 - 1:
            raise FuseviewError(f"--dim {shorten(key, 40)}={_shown(size)}: must be a whole number from 1"
                                f" to {2**31 - 1}")


def check_path(value: object, label: str) -> None:
    """OptionTypeError unless value is a non-empty file name (str or os.PathLike)."""
    if not isinstance(value, (str, os.PathLike)):
        raise OptionTypeError(f"{label} {_shown(value)}: must be a file name, not {type(value).__name__}")
    if os.fspath(value) in ("", b""):
        raise FuseviewError(f"{label} '': an empty file name")


# the API keyword spelled as the CLI's flag -> the settings field it sets
_ALIASES = {"budget": "budget_s", "dim": "dims"}


def api_settings(kwargs: Mapping[str, Any], fields: Iterable[str], renames: Mapping[str, str] | None = None
                 ) -> dict[str, Any]:
    """The keywords of an API call as settings fields, each checked as its CLI flag is; an unknown
    keyword is an OptionTypeError naming the ones taken."""
    known = set(fields)
    aliases = {**_ALIASES, **(renames or {})}
    out: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in kwargs.items():
        name = aliases.get(key, key)
        if key == "no_validate" and "validate" in known:
            name, value = "validate", (not value if isinstance(value, bool) else value)
        if name not in known:
            taken = sorted(known | {a for a, f in aliases.items() if f in known})
            raise OptionTypeError(
                f"unknown option {shorten(str(key), 40)!r}; this call takes {', '.join(taken)}")
        if name in out:
            raise OptionTypeError(f"option {name!r} given twice (as {given_as[name]!r} and {key!r})")
        given_as[name] = key
        if name == "dims" and not isinstance(value, Mapping) and isinstance(value, (list, tuple)):
            from fuseview.dims import parse_dim_args

            value = parse_dim_args([str(v) for v in value])
        out[name] = value
    check_values({("budget" if n == "budget_s" else n): v for n, v in out.items()})
    return out
