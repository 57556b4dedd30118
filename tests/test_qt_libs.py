"""The apt line fuseview prints is complete: every system library that Qt's widgets and its xcb, wayland and
offscreen platform plugins (with the integration plugins they load) NEED maps to a package in it, and the
README prints the same line (issue 38, finding 9: libwayland-cursor0 and libwayland-egl1 were missing)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fuseview import qt_libs

from .conftest import ROOT

PLATFORMS = ("xcb", "wayland", "offscreen")
# the plugins the platform plugins load at run time (GL, graphics and shell integrations, decorations)
PLUGIN_FOLDERS = ("xcbglintegrations", "wayland-graphics-integration-client", "wayland-shell-integration",
                  "wayland-decoration-client")


def _needed(lib: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\).*\[(.+?)\]", out)


def _system_needs() -> set[str]:
    """The sonames outside PySide6's Qt folder that the plugins and Qt's widgets need, transitively through
    Qt's own libraries."""
    folder = qt_libs._pyside_folder()
    if folder is None or shutil.which("readelf") is None:
        pytest.skip("needs PySide6 and readelf")
    qt = folder / "Qt"
    seeds = [qt / "plugins" / "platforms" / f"libq{p}.so" for p in PLATFORMS]
    seeds += [p for d in PLUGIN_FOLDERS for p in sorted((qt / "plugins" / d).glob("*.so"))]
    seeds.append(qt / "lib" / "libQt6Widgets.so.6")
    own = {p.name for p in (qt / "lib").iterdir()}
    seen: set[Path] = set()
    system: set[str] = set()
    todo = [s for s in seeds if s.is_file()]
    while todo:
        for name in _needed(todo.pop()):
            if name in own:
                if (qt / "lib" / name) not in seen:
                    seen.add(qt / "lib" / name)
                    todo.append(qt / "lib" / name)
            else:
                system.add(name)
    return system


def test_every_library_the_platform_plugins_need_is_installed_by_the_printed_line() -> None:
    packages = set(qt_libs.apt_line().split()[4:])
    needs = _system_needs()
    assert {"libwayland-cursor.so.0", "libwayland-egl.so.1", "libxcb-cursor.so.0"} <= needs
    known = qt_libs.WINDOW_LIBRARIES.keys() | qt_libs.BASE_LIBRARIES.keys()
    unmapped = sorted(n for n in needs if n not in known)
    assert not unmapped, unmapped
    absent = sorted(n for n in needs if n in qt_libs.WINDOW_LIBRARIES and qt_libs.PACKAGES[n] not in packages)
    assert not absent, absent
    assert {"libwayland-cursor0", "libwayland-egl1", "libwayland-client0"} <= packages


def test_the_readme_prints_the_programs_line() -> None:
    readme = (ROOT / "README.md").read_text()
    lines = re.findall(r"`(sudo apt-get install[^`]*)`", readme)
    assert lines == [qt_libs.apt_line()], lines


def absent_known_library() -> tuple[str, str] | None:
    """(soname, package) of a library fuseview knows the package of that this machine's loader cannot
    load, so a stand-in of it built and removed stays "not found" whatever the machine installed."""
    import ctypes

    for soname, package in qt_libs.PACKAGES.items():
        if soname in qt_libs.BASE_LIBRARIES:
            continue
        try:
            ctypes.CDLL(soname)
        except OSError:
            return soname, package
    return None


def plugin_missing(tmp_path: Path, soname: str) -> Path:
    """A stand-in libqxcb.so linked against a stand-in `soname`, which is then removed."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build a plugin with a missing library")
    (tmp_path / "dep.c").write_text("int dep(void) { return 1; }\n")
    (tmp_path / "plugin.c").write_text("int dep(void); int plugin(void) { return dep(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", soname, f"-Wl,-soname,{soname}", "dep.c"], cwd=tmp_path,
                   check=True)
    plugins = tmp_path / "platforms"
    plugins.mkdir()
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(plugins / "libqxcb.so"), "plugin.c", "-L.",
                    f"-l:{soname}"], cwd=tmp_path, check=True)
    (tmp_path / soname).unlink()
    return plugins


def xcb_plugin_missing_a_known_library(tmp_path: Path) -> tuple[str, str, Path, dict[str, str]]:
    """(soname, its package, the plugin folder, the env that loads it): a stand-in xcb plugin linked against a
    library fuseview knows the package of and this machine lacks; the test is skipped where there is none."""
    absent = absent_known_library()
    if absent is None:
        pytest.skip("this machine has every library fuseview knows the package of")
    soname, package = absent
    plugins = plugin_missing(tmp_path, soname)
    return soname, package, plugins, {"QT_QPA_PLATFORM": "xcb", "QT_QPA_PLATFORM_PLUGIN_PATH": str(plugins)}


def test_the_error_names_the_whole_line_when_a_known_library_is_missing(tmp_path: Path) -> None:
    soname, package, _plugins, env = xcb_plugin_missing_a_known_library(tmp_path)
    with pytest.raises(qt_libs.MissingLibraries) as err:
        qt_libs.check_qt_libraries("the window", env)
    text = str(err.value)
    assert f"`{qt_libs.apt_line()}" in text and soname in text and package in text
    assert "libwayland-cursor0 libwayland-egl1" in text  # loaded by the plugins, not seen by ldd here


def test_unknown_libraries_alone_are_named_as_they_are() -> None:
    # what the round-4 tests check end to end: names fuseview knows no package of are not completed
    line = qt_libs.apt_line(["libzz-b.so.1", "libzz-a.so.2"])
    assert line == "sudo apt-get install -y libzz-a.so.2 libzz-b.so.1"
    line = qt_libs.apt_line(["libwayland-egl.so.1", "libzz-a.so.2"])
    assert line.startswith(qt_libs.apt_line() + " ") and line.endswith(" libzz-a.so.2")
