"""The real program in a subprocess: --screenshot, a bad file, the smoke start, light imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtGui import QImage

from tests.conftest import REPO
from tests.gui.conftest import SCREENSHOTS

SAMPLE = REPO / "resources" / "samples" / "host_overhead_naive.sqlite"


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["QT_QPA_PLATFORM"] = "offscreen"
    env["KERNELSCOPE_CONFIG"] = str(tmp_path / "config")
    env["KERNELSCOPE_CACHE"] = str(tmp_path / "cache")
    return env


def _run(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = _env(tmp_path)
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "gui.app", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def test_screenshot_cli(tmp_path):
    out = SCREENSHOTS / "cli_stats.png"
    out.unlink(missing_ok=True)
    proc = _run(["--screenshot", str(out), "--view", "stats", str(SAMPLE)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1600, 1000)


def test_screenshot_cli_defaults_to_sample(tmp_path):
    out = tmp_path / "x.png"
    proc = _run(["--screenshot", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert QImage(str(out)).width() == 1600


def test_screenshot_of_bad_file_fails_with_one_sentence(tmp_path):
    bad = tmp_path / "empty.sqlite"
    bad.write_bytes(b"")
    out = tmp_path / "never.png"
    proc = _run(["--screenshot", str(out), str(bad)], tmp_path)
    assert proc.returncode != 0
    assert not out.exists()
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("kernelscope-gui:")]
    assert len(lines) == 1 and "empty" in lines[0] and lines[0].endswith(".")
    assert "Traceback" not in proc.stderr


def test_smoke_start_and_quit(tmp_path):
    """Start the real program with no report (first start opens the sample) and quit by timer."""
    exe = Path(sys.executable).with_name("kernelscope-gui")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "gui.app"]
    env = _env(tmp_path)
    proc = subprocess.run([*cmd, "--quit-after", "1.5"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    ini = (tmp_path / "config" / "kernelscope-gui.ini").read_text()
    assert "sample_opened=true" in ini
    assert "host_overhead_naive.sqlite" in ini  # the sample was opened and became recent


def test_importing_the_app_is_light():
    code = ("import sys, gui.app, gui.main_window; "
            "heavy = [m for m in ('pandas', 'pyqtgraph', 'numpy', 'engine.reports') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
