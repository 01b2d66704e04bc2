"""Bad input in the window: one sentence in the log and the status bar, no Qt warning, still usable.

The same bad files as tests/engine/cli/test_bad_input.py (truncated and foreign copies of the H200
fixtures, empty, a folder, a FIFO, /proc/1/mem), opened with MainWindow.open_path; plus an
.nsys-rep with no nsys, bad telemetry recordings in the Telemetry view, a Nsight Compute report
deleted after it opened, and ``kernelscope-gui --screenshot`` on a bad file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, NSYS_DIR, REPO
from tests.engine.cli.test_bad_input import (
    NCU_AWARE,
    NCU_REP,
    NSYS_REP,
    NSYS_VISIBILITY,
    TELEMETRY_CASES,
    make_bad_files,
    nsys_env,
)
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

GOOD = NSYS_DIR / "host_overhead_naive.sqlite"


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_bad_files(tmp_path_factory.mktemp("badgui"))


def _fails_with_one_sentence(qtbot, window, path: Path, fragment: str) -> str:
    with qtbot.waitSignal(window.sig_load_failed, timeout=LOAD_TIMEOUT_MS) as blocker:
        window.open_path(path)
    qtbot.waitUntil(lambda: not window.is_loading(), timeout=LOAD_TIMEOUT_MS)
    msg = blocker.args[1]
    assert fragment in msg, msg
    assert "\n" not in msg and msg.endswith(".") and "Traceback" not in msg
    assert window.log.errors() == [msg]
    assert window.statusBar().currentMessage() == msg
    assert window.reports.current is None
    assert not window.progress.isVisible()
    return msg


# .nsys-rep rows run with no nsys visible and with the fake nsys on PATH (the answer must not
# depend on what this machine has installed); the others with no nsys visible.
CASES = [(n, f, v) for n, f in sorted(NCU_AWARE.items())
         for v in (NSYS_VISIBILITY if n.endswith(".nsys-rep") else NSYS_VISIBILITY[:1])]


@pytest.mark.parametrize(("name", "fragment", "nsys"), CASES,
                         ids=[n + ("-fake-nsys" if v != "no-nsys" else "") for n, _, v in CASES])
def test_open_bad_file(qtbot, window, bad, monkeypatch, tmp_path, name: str, fragment: str,
                       nsys: str) -> None:
    for key, value in nsys_env(nsys, tmp_path).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("NSYS", raising=False)
    _fails_with_one_sentence(qtbot, window, bad[name], fragment)
    if name == "half.ncu-rep":
        screenshot(window, "bad_input_half_ncu_rep")
    # Still usable: a good report opens afterwards and is shown.
    open_and_wait(qtbot, window, GOOD)
    assert window.windowTitle() == "Kernelscope — host_overhead_naive.sqlite"


def test_nsys_rep_without_nsys(qtbot, window, monkeypatch) -> None:
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    monkeypatch.setenv("KERNELSCOPE_TOOL_ROOT", "/nonexistent")
    msg = _fails_with_one_sentence(
        qtbot, window, NSYS_REP,
        "was written by Nsight Systems 2025.3.1.0 and needs an nsys of that version or newer",
    )
    assert "set NSYS=/path/to/nsys" in msg
    screenshot(window, "bad_input_no_nsys")


@pytest.mark.parametrize(("name", "fragment"), sorted(TELEMETRY_CASES.items()),
                         ids=sorted(TELEMETRY_CASES))
def test_telemetry_view_bad_recording(qtbot, window, bad, name: str, fragment: str) -> None:
    window.set_view("telemetry")
    view = window.views["telemetry"]
    view.start_replay(bad[name], speed=0)
    assert fragment in view.status.text(), view.status.text()
    assert not view.is_busy()
    logged = [m for _, m in window.log.entries if m.startswith("Telemetry:")]
    assert len(logged) == 1 and fragment in logged[0] and "\n" not in logged[0]
    # Still usable: the real H200 recording replays to the end.
    with qtbot.waitSignal(view.sig_ready, timeout=LOAD_TIMEOUT_MS):
        view.start_replay(FIXTURES / "telemetry" / "telemetry_h200.csv", speed=0)
    assert "is not" not in view.status.text()


def test_ncu_report_deleted_after_opening(qtbot, window, tmp_path, monkeypatch) -> None:
    # Our own reader decodes every metric at once (the file is not read again); the ncu_report
    # reader, its fallback, reads the remaining metrics lazily: that one is tested here.
    monkeypatch.setenv("KERNELSCOPE_NCU_OWN", "0")
    copy = tmp_path / NCU_REP.name
    shutil.copy(NCU_REP, copy)
    report = open_and_wait(qtbot, window, copy)
    copy.unlink()
    # Its remaining metrics are read lazily; the engine says the file is gone, as one sentence.
    from engine.system.errors import ReportError

    with pytest.raises(ReportError, match=r"could not be read again .* open it again\.$"):
        _ = report.trace.ncu.raw
    # The window is still usable.
    open_and_wait(qtbot, window, GOOD)
    assert window.reports.current is not None and window.reports.current.path == GOOD


@pytest.mark.parametrize("name", ["half.sqlite", "fifo.sqlite", "unreadable"])
def test_screenshot_cli_bad_file(bad, tmp_path, name: str) -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    out = tmp_path / "x.png"
    r = subprocess.run(
        [sys.executable, "-m", "gui.app", str(bad[name]), "--screenshot", str(out), "--view", "stats"],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
    )
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelscope-gui: "), r.stderr
    assert NCU_AWARE[name] in lines[0]
    assert not out.exists()
