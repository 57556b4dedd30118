"""Text from a model is hostile: control characters escaped for terminals, XML-invalid ones out of SVG."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

# C0 and C1 controls, DEL, the bidi marks, embeddings, overrides and isolates that reorder what a terminal
# shows (LRM, RLM, ALM, LRE..RLO, LRI..PDI), characters that show nothing or break lines where no newline is
# seen (soft hyphen, zero-width space/joiners, line and paragraph separators, word joiner, BOM), and lone
# surrogates: the bytes of a file name that is not UTF-8 (Python's surrogateescape), shown as \xNN.
_CONTROLS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]"
)
# Characters XML 1.0 forbids anywhere in a document (even as character references).
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_XML_INVALID_REFS = re.compile(rb"&#(?:x0*(?:[0-8bBcCeEfF]|1[0-9a-fA-F])|0*(?:[0-8]|1[124-9]|2[0-9]|3[01]));")


def _escape(m: re.Match) -> str:
    c = ord(m.group(0))
    if 0xDC80 <= c <= 0xDCFF:  # a byte that was not UTF-8, as Python decodes file names
        return f"\\x{c - 0xDC00:02x}"
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def _escape_json(m: re.Match) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def escape_controls(text: str, keep: str = "\n\t", json_style: bool = False) -> str:
    """text with control characters (other than those in keep) written as \\xNN escapes (\\uNNNN with
    json_style, which stays valid inside a JSON string)."""
    esc = _escape_json if json_style else _escape
    if keep:
        return _CONTROLS.sub(lambda m: m.group(0) if m.group(0) in keep else esc(m), text)
    return _CONTROLS.sub(esc, text)


def shorten(text: str, width: int = 120) -> str:
    """text cut to width characters with an ellipsis in the middle when longer."""
    if len(text) <= width:
        return text
    keep = max(width - 1, 2)
    return text[: keep // 2 + keep % 2] + "…" + text[len(text) - keep // 2:]


def one_line(text: str, width: int = 400) -> str:
    """text as one short terminal line: every control character escaped, long text shortened."""
    return shorten(escape_controls(text, keep=""), width)


def xml_safe(text: str) -> str:
    """text without the characters XML 1.0 forbids (each becomes \\xNN, readable and valid)."""
    return _XML_INVALID.sub(_escape, text)


def sanitize_svg_file(path: str | os.PathLike) -> None:
    """Rewrite an SVG in place so that it is well-formed XML whatever names it shows."""
    with open(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8", errors="replace")
    clean = xml_safe(text).encode("utf-8")
    clean = _XML_INVALID_REFS.sub(b"?", clean)
    if clean != data:
        with open(path, "wb") as f:
            f.write(clean)


# Names read from models in this run that hold a newline, CR or tab: streams keep those characters in
# their own output, so such a name would print as several lines ("x\nfuseview: error: ..."); every
# EscapingStream prints them escaped whole, as it does the file names of the command line.
_MODEL_NAMES: dict[str, None] = {}
MAX_MODEL_NAMES = 256  # a hostile model may hold many: beyond these they print as they are (README)
_BREAKS = re.compile("[\n\r\t]")
_NOTING: list[bool] = [False]  # [in a command-line run]


def noting_model_names() -> bool:
    """True in a command-line run, whose streams print names (set by forget_model_names)."""
    return _NOTING[0]


def note_model_names(names: Iterable[str]) -> None:
    """Remember the names (of nodes, tensors, ...) that hold a line break or a tab, to print them escaped."""
    names = [n for n in names if isinstance(n, str)]
    joined = "\x00".join(names)
    # a substring test per character (a fast search in C) for the usual model, which has none: the regex
    # walked a 48-layer GPT-2's 0.8 MB of names at a fifth of the speed
    if "\n" not in joined and "\r" not in joined and "\t" not in joined:
        return
    for n in names:
        if len(_MODEL_NAMES) >= MAX_MODEL_NAMES:
            return
        if _BREAKS.search(n):
            _MODEL_NAMES[n] = None


def forget_model_names() -> None:
    """Start a new command-line run: no model names remembered, those of the models it reads noted."""
    _MODEL_NAMES.clear()
    _NOTING[0] = True


class EscapingStream:
    """A text stream wrapper that escapes control characters (except keep) in everything written.

    When the reader of a pipe goes away (`fuseview fuse ... | head -1`), the rest of the output goes to
    /dev/null and the work goes on: the file being made is still written, and no BrokenPipeError shows.
    """

    def __init__(self, stream, keep: str = "\n\t", json_style: bool = False) -> None:
        self._stream = stream
        self._keep = keep
        self._json_style = json_style
        self.broken_pipe = False
        self._literals: dict[str, str] = {}

    def escape_literally(self, texts) -> None:
        """Print these strings (file names given by the user) with every control escaped, newlines too."""
        for t in texts:
            if isinstance(t, str) and t and escape_controls(t, keep="") != t:
                self._literals[t] = escape_controls(t, keep="", json_style=self._json_style)

    def write(self, s: str) -> int:
        """Write s with its control characters escaped (nothing, once the reader has gone)."""
        if not self.broken_pipe:
            text = s
            for raw, escaped in self._literals.items():
                if raw in text:
                    text = text.replace(raw, escaped)
            for raw in _MODEL_NAMES:
                if raw in text:
                    text = text.replace(raw, escape_controls(raw, keep="", json_style=self._json_style))
            try:
                self._stream.write(escape_controls(text, self._keep, self._json_style))
            except BrokenPipeError:
                self._silence()
        return len(s)

    def flush(self) -> None:
        """Flush the stream (nothing, once the reader has gone)."""
        if not self.broken_pipe:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._silence()

    def _silence(self) -> None:
        self.broken_pipe = True
        try:
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
        except (OSError, ValueError, AttributeError):
            return
        os.dup2(devnull, fd)  # what is still buffered, and the flush at exit, go nowhere
        os.close(devnull)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)
