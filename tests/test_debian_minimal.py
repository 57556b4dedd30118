"""fuseview on a minimal Debian 12 (debootstrap --variant=minbase, python3 only: no X, GL or glib libraries).

The rootfs is built once and kept in ~/.cache/fuseview-debootstrap/bookworm (about 250 MB); each command runs
in it through chroot, in a private mount namespace where this tree and the test venv's site-packages are
bound read-only (Debian 12's python3 is 3.11, the ABI of the venv's wheels). Skipped, with the reason, where
debootstrap, root, unshare or the Debian mirror is not available.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests import hostile_cases as hc

pytestmark = pytest.mark.slow

CACHE = Path.home() / ".cache" / "fuseview-debootstrap"
ROOTFS = CACHE / "bookworm"
MIRROR = "http://deb.debian.org/debian"


def _rootfs() -> Path:
    if not sys.platform.startswith("linux"):
        pytest.skip("debootstrap builds a Linux system")
    if os.geteuid() != 0:
        pytest.skip("debootstrap and chroot need root")
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux) for a private mount namespace")
    if (ROOTFS / "usr" / "bin" / "python3").is_file():
        return ROOTFS
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (apt-get install debootstrap)")
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = CACHE / "bookworm.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        done = subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv",
                               "bookworm", str(tmp), MIRROR], capture_output=True, text=True, timeout=1500)
    except subprocess.TimeoutExpired:
        pytest.skip("debootstrap took more than 25 minutes (a slow mirror)")
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
        pytest.skip(f"debootstrap failed (no network to {MIRROR}?): {tail[0][:200]}")
    tmp.rename(ROOTFS)
    return ROOTFS


def _in_debian(root: Path, argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python3 -m fuseview ARGV` in /work of the Debian rootfs, this tree and the venv's packages bound."""
    site = sysconfig.get_paths()["purelib"]
    tree = str(hc.ROOT)
    script = (
        "set -e; mkdir -p \"$1/opt/fuseview\" \"$1/opt/site\";"
        " mount --bind -o ro \"$2\" \"$1/opt/fuseview\"; mount --bind -o ro \"$3\" \"$1/opt/site\";"
        " mount -t proc proc \"$1/proc\";"
        " shift 3; exec chroot \"$R\" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp LANG=C.UTF-8"
        " PYTHONPATH=/opt/fuseview:/opt/site OMP_NUM_THREADS=1 $EXTRA"
        " /bin/sh -c 'cd /work && exec python3 -m fuseview \"$@\"' fuseview \"$@\""
    )
    extra = " ".join(f"{k}={v}" for k, v in (env or {}).items())
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(root),
                           tree, site, *argv], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "R": str(root), "EXTRA": extra})


def _one_whole_line(run: subprocess.CompletedProcess, *words: str) -> None:
    lines = run.stderr.splitlines()
    assert run.returncode == 2 and len(lines) == 1, (run.returncode, run.stderr[-800:])
    assert lines[0].startswith("fuseview: error: ") and "…" not in lines[0], lines[0]
    for w in words:
        assert w in lines[0], lines[0]


def test_fuseview_on_a_minimal_debian_12_works_or_says_what_to_install() -> None:
    root = _rootfs()
    work = root / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (work / "m.onnx").write_bytes(hc.mlp().SerializeToString())
    try:
        run = _in_debian(root, ["--version"])
        if run.returncode != 0 and "mount" in run.stderr:
            pytest.skip(f"cannot bind-mount into the rootfs here: {run.stderr.strip()[:200]}")
        assert run.returncode == 0 and run.stdout.startswith("fuseview "), run.stderr[-800:]
        for argv in (["info", "m.onnx"], ["scan", "m.onnx"], ["fuse", "m.onnx", "-o", "f.onnx"],
                     ["render", "m.onnx", "-o", "g.svg"]):
            run = _in_debian(root, argv)
            assert run.returncode == 0, (argv, run.stderr[-800:])
        assert (work / "f.onnx").is_file() and (work / "g.svg").read_text().startswith("<?xml")
        # no X, GL or glib here: what needs Qt says so in one whole line with the packages to install
        _one_whole_line(_in_debian(root, []), "xvfb-run fuseview", "--screenshot s.png")
        _one_whole_line(_in_debian(root, ["render", "m.onnx", "-o", "g.png"]), "sudo apt-get install -y ",
                        "libglib2.0-0")
        _one_whole_line(_in_debian(root, ["open", "m.onnx", "--screenshot", "s.png"]),
                        "sudo apt-get install -y ", "libgl1")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _sh_in_debian(root: Path, command: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """`sh -c COMMAND` as root in the rootfs (proc mounted, the host's resolv.conf for apt), this tree and
    the venv's packages bound as in _in_debian."""
    site = sysconfig.get_paths()["purelib"]
    shutil.copyfile("/etc/resolv.conf", root / "etc" / "resolv.conf")
    script = (
        "set -e; mkdir -p \"$1/opt/fuseview\" \"$1/opt/site\";"
        " mount --bind -o ro \"$2\" \"$1/opt/fuseview\"; mount --bind -o ro \"$3\" \"$1/opt/site\";"
        " mount -t proc proc \"$1/proc\";"
        " exec chroot \"$1\" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LANG=C.UTF-8"
        " DEBIAN_FRONTEND=noninteractive PYTHONPATH=/opt/fuseview:/opt/site OMP_NUM_THREADS=1"
        " /bin/sh -c \"$4\""
    )
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(root),
                           str(hc.ROOT), site, command], capture_output=True, text=True, timeout=timeout)


def test_installing_exactly_the_printed_line_opens_the_window_on_a_minimal_debian_12() -> None:
    # issue 38, finding 9: after the printed line Qt's plugins still lacked libwayland-cursor.so.0 and
    # libwayland-egl.so.1. In a copy of the rootfs (the cached one stays bare for the test above)
    bare = _rootfs()
    root = CACHE / "bookworm-window"
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run(["cp", "-a", str(bare), str(root)], check=True)
    try:
        work = root / "work"
        work.mkdir(exist_ok=True)
        (work / "m.onnx").write_bytes(hc.mlp().SerializeToString())
        run = _in_debian(root, ["open", "m.onnx", "--screenshot", "s.png"])
        line = run.stderr.strip()
        assert "`sudo apt-get install -y " in line, line[-800:]
        packages = line.split("`sudo apt-get install -y ", 1)[1].split("`", 1)[0]
        got = _sh_in_debian(root, f"apt-get update -qq && apt-get install -y -qq {packages}")  # as printed
        if got.returncode != 0 and "Temporary failure resolving" in got.stdout + got.stderr:
            pytest.skip("no network to Debian's mirror for apt-get")
        assert got.returncode == 0, got.stderr[-800:]
        qt = "/opt/site/PySide6/Qt/plugins"
        ldd = _sh_in_debian(root, f"for p in {qt}/platforms/*.so {qt}/xcbglintegrations/*.so"
                                  f" {qt}/wayland-*/*.so; do ldd $p; done 2>&1 | grep 'not found' || true")
        assert ldd.returncode == 0 and "not found" not in ldd.stdout, ldd.stdout[-800:]
        run = _in_debian(root, ["open", "m.onnx", "--screenshot", "s.png"])
        assert run.returncode == 0 and (work / "s.png").stat().st_size > 1000, run.stderr[-800:]
        # a window on X: xvfb (the display, not a library of fuseview's) added
        got = _sh_in_debian(root, "apt-get install -y -qq --no-install-recommends xvfb xauth")
        assert got.returncode == 0, got.stderr[-800:]
        (work / "s.png").unlink()
        run = _sh_in_debian(root, "cd /work && QT_QPA_PLATFORM=xcb xvfb-run -a python3 -m fuseview open"
                                  " m.onnx --screenshot s.png")
        assert run.returncode == 0 and (work / "s.png").stat().st_size > 1000, run.stderr[-800:]
    finally:
        shutil.rmtree(root, ignore_errors=True)
