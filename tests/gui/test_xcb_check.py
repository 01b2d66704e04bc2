"""Qt's xcb plugin on a real X server: the README's apt line is complete, the app starts under Xvfb,
and a missing library gives one sentence with the install command instead of Qt's abort (rc 134)."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gui.xcb_check import BASE_SONAMES, SONAME_PACKAGES, elf_needed, install_command, qt_dir, system_libraries
from tests.conftest import REPO

QT = qt_dir()
PLUGIN = QT / "plugins" / "platforms" / "libqxcb.so" if QT else None
pytestmark = pytest.mark.skipif(PLUGIN is None or not PLUGIN.is_file(), reason="PySide6 has no xcb plugin")


def _readme_apt_packages() -> set[str]:
    readme = (REPO / "README.md").read_text()
    lines = [ln for ln in readme.splitlines() if "apt-get install" in ln and "libxcb-cursor0" in ln]
    assert len(lines) == 1, "the README has one apt line for the Qt libraries"
    return set(lines[0].split("apt-get install", 1)[1].replace("`", " ").split()) - {"-y", "-qq", "sudo"}


def test_elf_reader_agrees_with_readelf() -> None:
    if shutil.which("readelf") is None:
        pytest.skip("binutils' readelf is not installed")
    out = subprocess.run(["readelf", "-d", str(PLUGIN)], capture_output=True, text=True, check=True).stdout
    assert elf_needed(PLUGIN) == re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)


def test_readme_names_every_library_the_plugin_needs() -> None:
    """Fails when a PySide6 upgrade makes the plugin need a library that the README does not list."""
    needed = system_libraries(QT)  # type: ignore[arg-type]
    assert "libxcb-icccm.so.4" in needed and "libxcb-keysyms.so.1" in needed  # the ones that bit users
    unknown = [s for s in needed if s not in SONAME_PACKAGES and s not in BASE_SONAMES]
    assert unknown == [], f"add these to gui/xcb_check.SONAME_PACKAGES and the README: {unknown}"
    wanted = {SONAME_PACKAGES[s] for s in needed if s in SONAME_PACKAGES}
    listed = _readme_apt_packages()
    assert wanted - listed == set(), f"the README's apt line lacks {sorted(wanted - listed)}"
    assert listed - wanted == set(), f"the README's apt line names packages not needed: {listed - wanted}"
    assert set(install_command().split()[4:]) == listed


def _lib_path(soname: str) -> Path:
    try:
        ctypes.CDLL(soname)
    except OSError:  # a machine without the README's X11 libraries: nothing to hide
        pytest.skip(f"{soname} is not installed here (the README's apt line installs it)")
    for line in Path("/proc/self/maps").read_text().splitlines():
        if line.rstrip().endswith(soname) or f"/{soname}." in line:
            return Path(line.split()[-1])
    pytest.skip(f"{soname} is not loaded from a file")


def _gui(args: list[str], tmp_path: Path, **env_extra: str) -> list[str]:
    env = dict(os.environ, KERNELSCOPE_CONFIG=str(tmp_path / "config"), **env_extra)
    return [sys.executable, "-m", "gui.app", *args], env  # type: ignore[return-value]


def test_missing_library_gives_one_sentence(tmp_path: Path) -> None:
    """Hide libxcb-icccm.so.4 in a private mount namespace, as on a fresh Debian without it."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private mount namespace")
    lib = _lib_path("libxcb-icccm.so.4")
    argv, env = _gui(["--quit-after", "1"], tmp_path, QT_QPA_PLATFORM="xcb", DISPLAY=":0")
    script = f"mount --bind /dev/null {lib} && exec " + " ".join(f"'{a}'" for a in argv)
    r = subprocess.run(["unshare", "-m", "bash", "-c", script], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=60)
    if "mount:" in r.stderr or "unshare:" in r.stderr:
        pytest.skip(f"no private mount namespace here: {r.stderr.strip()}")
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0] == (
        "kernelscope-gui: Qt's X11 (xcb) platform plugin cannot load because libxcb-icccm.so.4 is "
        "missing; on Debian/Ubuntu install it with `sudo apt-get install -y libxcb-icccm4` (or all the "
        f"plugin needs with `{install_command()}`), or run with QT_QPA_PLATFORM=offscreen."
    )


def test_app_starts_on_a_real_x_server(tmp_path: Path) -> None:
    """The README's app command under Xvfb with the xcb plugin: the window shows, then --quit-after."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        pytest.skip("Xvfb is not installed")
    display = f":{90 + os.getpid() % 500}"
    server = subprocess.Popen([xvfb, display, "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not Path(f"/tmp/.X11-unix/X{display[1:]}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        argv, env = _gui(["--quit-after", "2"], tmp_path, QT_QPA_PLATFORM="xcb", DISPLAY=display)
        r = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=90)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "xcb" not in r.stderr, r.stderr
    assert "sample_opened=true" in (tmp_path / "config" / "kernelscope-gui.ini").read_text()
