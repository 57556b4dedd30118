"""The one guarded writer: every file (and the one folder, a capture) fuseview writes goes through here.

A write never lands on an input of the same run (by resolved path and by inode), never on a device, FIFO,
socket or folder, and never shows half a file: it goes to a temp file beside the target (prefix
`.fuseview-tmp-<pid>-`), is flushed to disk, then renamed over a regular file or onto nothing. A run
killed mid-write leaves only its temp file, which the next write into that folder removes. A command
that writes several files does so inside `all_or_none()`: all are renamed into place at the end, or none.

Links: an output path that is a symbolic link is refused, whatever it points to. Renaming over a link
replaces the link itself (`--json /dev/stdout`, a link to /proc/self/fd/1, became a regular file), and
writing through it would write wherever the link's owner chose; the user names the target instead. The
check and the write look at the same object: lstat, never stat, before and again just before the rename,
and a target that did not exist is created with link(2), which fails rather than replace what appeared.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from fuseview.errors import FuseviewError, WriteError
from fuseview.textsafe import sanitize_svg_file

TEMP_PREFIX = ".fuseview-tmp-"

# (st_dev, st_ino, st_ctime_ns) and resolved paths of every file this process read as input. The ctime
# tells the input from a new file that reuses its inode number after the input was deleted.
_input_ids: set[tuple[int, int, int]] = set()
_input_paths: set[str] = set()


def register_input(path: str | os.PathLike) -> None:
    """Mark a file as an input of this run: no write of this process may replace it."""
    p = Path(path)
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        _input_paths.add(str(p.resolve()))
    with contextlib.suppress(OSError, ValueError):
        st = os.stat(p)
        _input_ids.add((st.st_dev, st.st_ino, st.st_ctime_ns))


def register_inputs(paths: Iterable[str | os.PathLike | None]) -> None:
    """register_input for each path that is given (None is skipped)."""
    for p in paths:
        if p is not None and str(p) != "":
            register_input(p)


def clear_inputs() -> None:
    """Forget every registered input (tests and long-lived windows that open another model)."""
    _input_ids.clear()
    _input_paths.clear()


@contextlib.contextmanager
def guarded_inputs(paths: Iterable[str | os.PathLike | None]) -> Iterator[None]:
    """Within the block, the given files are inputs too (registered, then forgotten unless already so)."""
    before_ids, before_paths = set(_input_ids), set(_input_paths)
    register_inputs(paths)
    try:
        yield
    finally:
        _input_ids.intersection_update(before_ids)
        _input_paths.intersection_update(before_paths)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_output(path: str | os.PathLike) -> Path:
    """Refuse an output path that is an input of this run, a link, a device, FIFO, socket or folder."""
    out = Path(path)
    if str(path) == "":
        raise FuseviewError("an empty output file name")
    try:
        st = os.lstat(out)  # the path itself: a link is judged as a link, not by what it points to
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise FuseviewError(f"{out}: cannot write there ({exc.strerror or exc})") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise FuseviewError(
                f"{out}: is a symbolic link; fuseview never replaces or writes through a link"
                " (name the file it points to)"
            )
        if not stat.S_ISREG(st.st_mode):
            raise FuseviewError(f"{out}: is {_kind(st.st_mode)}; fuseview writes only regular files")
        if (st.st_dev, st.st_ino, st.st_ctime_ns) in _input_ids:
            raise FuseviewError(f"{out}: is an input of this run; refusing to overwrite it")
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        if str(out.resolve()) in _input_paths:
            raise FuseviewError(f"{out}: is an input of this run; refusing to overwrite it")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise FuseviewError(f"{out}: folder does not exist ({folder})")
    return out


def _exists(path: Path) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def _publish(tmp: str, out: Path) -> None:
    """Move the finished temp file to out: replace a regular file, or create out without replacing."""
    check_output(out)  # again: the target may have changed while we wrote
    if _exists(out):
        os.replace(tmp, out)
        return
    try:
        os.link(tmp, out)  # fails if anything (a link, a FIFO) appeared at out since the check
    except FileExistsError:
        raise FuseviewError(f"{out}: appeared while fuseview was writing it; not replaced") from None
    except OSError:
        os.replace(tmp, out)  # a file system without hard links (vfat): out was checked just above
        return
    os.unlink(tmp)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def clean_stale_temps(folder: str | os.PathLike, min_age_s: float = 0.0) -> list[Path]:
    """Remove temp files of fuseview runs that died mid-write in folder (their process is gone, the file is
    this user's and at least min_age_s old)."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(os.fspath(folder)))
    except (OSError, ValueError):  # ValueError: a name no file system takes (a lone surrogate)
        return removed
    now = time.time()
    for e in entries:
        if not e.name.startswith(TEMP_PREFIX):
            continue
        pid_text = e.name[len(TEMP_PREFIX):].split("-", 1)[0]
        # a live process's temp file is a write in progress (ours included): leave it
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _pid_alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            st = e.stat(follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and now - st.st_mtime >= min_age_s:
                os.unlink(e.path)
                removed.append(Path(e.path))
    return removed


@contextlib.contextmanager
def private_temp_folder(prefix: str) -> Iterator[str]:
    """A temp folder `<prefix><pid>-...` in the system's temp folder, removed when the block ends; those
    that runs killed before their clean-up (SIGKILL) left behind are removed first."""
    parent = tempfile.gettempdir()
    for e in _scandir(parent):
        pid_text = e.name[len(prefix):].split("-", 1)[0] if e.name.startswith(prefix) else ""
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or _pid_alive(int(pid_text)):
            continue
        with contextlib.suppress(OSError):
            st = e.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():  # ours, and not through a link
                shutil.rmtree(e.path, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-", dir=parent) as folder:
        yield folder


def _scandir(folder: str) -> list[os.DirEntry]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []


def _new_file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _fsync(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: str | os.PathLike, write: Callable[[str], None], allow_empty: bool = True) -> Path:
    """Call write(tmp) on a temp file beside path, then rename it over path; on failure nothing is left."""
    out = check_output(path)
    folder = out.parent if str(out.parent) else Path(".")
    clean_stale_temps(folder)
    # the temp name keeps the suffix: image writers pick their format from it
    try:
        fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-", suffix=out.suffix or ".tmp",
                                   dir=folder)
    except OSError as exc:
        raise WriteError(f"{out}: cannot write in {folder} ({exc.strerror or exc})") from None
    os.close(fd)
    try:
        write(tmp)
        if out.suffix.lower() == ".svg":
            sanitize_svg_file(tmp)  # names from a model may hold characters XML forbids
        if not allow_empty and os.path.getsize(tmp) == 0:
            raise FuseviewError(f"{out}: nothing was written")
        os.chmod(tmp, _new_file_mode())  # mkstemp makes 0600; the result is as readable as any new file
        _fsync(tmp)
        if _staging.files is not None:  # inside all_or_none: renamed with the others when the block ends
            _staging.files.append((tmp, out))
            return out
        _publish(tmp, out)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, FuseviewError):
            raise WriteError(f"{out}: cannot write ({exc.strerror or exc})") from None
        raise
    return out


class _Staging(threading.local):
    """The temps of this thread's open all_or_none block, in the order written (None: no block open)."""

    files: list[tuple[str, Path]] | None = None


_staging = _Staging()


@contextlib.contextmanager
def all_or_none() -> Iterator[None]:
    """Every write_atomic of this thread inside the block (a command's model, plan and report) is held in
    its temp file; when the block ends they are renamed into place together, and if it fails none is: the
    temps are removed and any output already replaced gets its old file back."""
    if _staging.files is not None:  # nested: the outer block publishes
        yield
        return
    _staging.files = []
    try:
        yield
        staged = list(_staging.files)
        for _tmp, out in staged:  # every target once more, before any rename
            check_output(out)
        _publish_together(staged)
    finally:
        for tmp, _out in _staging.files:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _staging.files = None


def _publish_together(staged: list[tuple[str, Path]]) -> None:
    """Rename each temp over its target; on a failure, undo the renames made so far."""
    done: list[tuple[Path, bool, str | None]] = []  # (target, it existed, a link to what it was)
    try:
        for tmp, out in staged:
            existed, backup = _exists(out), None
            if existed:
                with contextlib.suppress(OSError):  # no hard links (vfat): that one cannot be undone
                    os.link(out, f"{tmp}.old")
                    backup = f"{tmp}.old"
            _publish(tmp, out)
            done.append((out, existed, backup))
    except BaseException as exc:
        for out, existed, backup in reversed(done):
            with contextlib.suppress(OSError):
                if not existed:
                    os.unlink(out)
                elif backup is not None:
                    os.replace(backup, out)
        _drop_backups(done)
        if isinstance(exc, OSError) and not isinstance(exc, FuseviewError):
            raise WriteError(f"cannot write the outputs ({exc.strerror or exc}); none written") from None
        raise
    _drop_backups(done)


def _drop_backups(done: list[tuple[Path, bool, str | None]]) -> None:
    for _out, _existed, backup in done:
        if backup is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(backup)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write text (UTF-8) atomically."""
    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8")

    return write_atomic(path, write)



def publish_folder(tmp: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Put the complete folder tmp (made beside out) at out, replacing a folder there only now: the
    earlier one is moved aside first and put back if the move fails, then removed. A link or anything
    but a folder at out is refused, checked again just before the rename."""
    tmp_path, out_path = Path(tmp), Path(out)
    try:
        st = os.lstat(out_path)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise FuseviewError(f"{out_path}: exists and is not a folder ({_kind(st.st_mode)}); not replaced")
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp_path, 0o777 & ~mask)  # a folder as mkdir would make it (mkdtemp's is private)
    old = None
    if st is not None:
        old = Path(tempfile.mkdtemp(prefix=".fuseview-old-", dir=out_path.parent))
        os.replace(out_path, old / "folder")
    try:
        os.replace(tmp_path, out_path)
    except OSError:
        if old is not None:
            os.replace(old / "folder", out_path)  # the earlier folder back where it was
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out_path
