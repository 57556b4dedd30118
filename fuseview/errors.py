"""The one exception type whose message is meant for the user, and how foreign errors become one line."""

from __future__ import annotations

from fuseview.textsafe import one_line, shorten

# The longest message an error keeps: a value quoted from a hostile file (a 200 MB `kind`) is cut in the
# middle, so library callers, logs and dialogs get a bounded message, not only the CLI's line.
MAX_MESSAGE_CHARS = 2000


class FuseviewError(Exception):
    """A problem with the user's input, described in one line they can act on."""

    def __init__(self, message: object = "", *args: object) -> None:
        if isinstance(message, str) and len(message) > MAX_MESSAGE_CHARS:
            message = shorten(message, MAX_MESSAGE_CHARS)
        super().__init__(message, *args)


class Cancelled(FuseviewError):
    """The user cancelled a background job (the one cancellation exception of fuseview)."""


class WriteError(FuseviewError, OSError):
    """A file could not be written (disk full, permission denied): both a user message and an OSError."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "cannot write"


class TargetError(Exception):
    """A target could not run a measurement (cluster unreachable, node lost, budget exceeded): one line.

    Not a FuseviewError on purpose: tune turns a FuseviewError from one A/B into "this variant cannot be
    timed" and goes on; a lost target must end the whole run instead.
    """


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def user_error_message(exc: BaseException) -> str | None:
    """The one-line message for an error that means the input was refused, None for a fuseview bug.

    onnx's checker and shape inference, onnxruntime (loading or running a model), protobuf and text
    decoding, exhausted memory and runaway recursion all come from what the user gave us.
    """
    if isinstance(exc, TargetError):
        return str(exc)
    module = type(exc).__module__ or ""
    if module.startswith("onnxruntime"):
        return f"onnxruntime refused the model: {_first_line(exc)}"
    if module.startswith("onnx") and type(exc).__name__ in ("ValidationError", "InferenceError"):
        return f"onnx rejects the model: {_first_line(exc)}"
    if module.startswith("google.protobuf"):
        return f"not a readable ONNX model: {_first_line(exc)}"
    if isinstance(exc, UnicodeError):
        return f"text in the input is not valid UTF-8: {_first_line(exc)}"
    if isinstance(exc, MemoryError):
        return "out of memory: the model or its inputs are too large for this machine (try smaller --dim)"
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply to process"
    return None


def error_text(exc: BaseException) -> str:
    """A one-line message for an exception: the FuseviewError text, the input refusal (onnx, onnxruntime,
    decoding) or the type and message of others; control characters escaped, shortened to 500."""
    if isinstance(exc, FuseviewError):
        text = str(exc)
    else:
        text = user_error_message(exc) or f"{type(exc).__name__}: {exc}"
    return one_line(" ".join(text.split()), 500)
