"""The summary of a big report in a child process (engine.analysis.opened chooses it,
engine.analysis.findings.overview_store runs it on the engine's child runner) and kept on disk: same
result as in the window's process, one sentence when the child fails or is killed, cancel stops it,
the next open loads it from the cache."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from engine.system.errors import KernelscopeError
from tests.conftest import NSYS_DIR, alive
from tests.gui.conftest import LOAD_TIMEOUT_MS, open_and_wait, screenshot

REPORT = NSYS_DIR / "host_overhead_gpumetrics.sqlite"


def _in_process(path: Path, range_name: str | None = None):
    from engine.analysis.findings.overview import overview
    from engine.reports import open_report

    trace = open_report(path)
    try:
        return overview(trace, range_name=range_name)
    finally:
        trace.close()


def run_child(path: Path, range_name: str | None = None, **kwargs):
    """The window's child: the overview computed by the engine's child runner."""
    from engine.analysis.findings.overview_store import compute_in_child
    from engine.analysis.opened import CHILD_HINT

    return compute_in_child(path, range_name, hint=CHILD_HINT, **kwargs)


def _json(overview) -> str:
    summary, found = overview
    return json.dumps([summary.to_json(), [f.to_json() for f in found]], sort_keys=True)


def _overview_children() -> list[int]:
    """Our running overview_child children (from /proc: the child runner keeps no process list)."""
    out = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            kids = Path(f"/proc/{os.getpid()}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for k in kids:
            try:
                cmd = Path(f"/proc/{k}/cmdline").read_bytes()
            except OSError:
                continue
            if b"overview_child" in cmd:
                out.append(int(k))
    return out


def _kill_first_child(sig: int, seen: list[int], stop: threading.Event) -> None:
    while not stop.is_set():
        kids = _overview_children()
        if kids:
            seen.extend(kids)
            os.kill(kids[0], sig)
            return
        time.sleep(0.005)


@pytest.mark.parametrize("report", [REPORT, NSYS_DIR / "torch_sdpa_gemm.sqlite"])
def test_child_gives_the_summary_and_findings_of_the_engine(report):
    steps: list[str] = []
    got = run_child(report, progress=steps.append)
    assert _json(got) == _json(_in_process(report))
    assert got[0].wall.span_ns > 0 and got[0].report.path.endswith(report.name)
    assert steps and all(s.startswith("In a separate process: ") for s in steps)


def test_child_with_a_step_range_uses_it():
    summary, _found = _in_process(REPORT)
    assert summary.iterations is not None
    name = summary.iterations.candidates[1]  # another NVTX range than the one found by structure
    assert name != summary.iterations.range
    got = run_child(REPORT, name)
    assert got[0].iterations is not None and got[0].iterations.range == name
    assert _json(got) == _json(_in_process(REPORT, name))


def test_a_file_that_is_not_a_report_gives_the_engines_sentence(tmp_path):
    from engine.reports import open_report
    bad = tmp_path / "notes.sqlite"
    bad.write_text("this is not a report\n")
    with pytest.raises(KernelscopeError) as engine:
        open_report(bad)
    with pytest.raises(KernelscopeError) as info:
        run_child(bad)
    assert str(info.value) == " ".join(str(engine.value).split())
    assert "Traceback" not in str(info.value)


def test_a_killed_child_gives_one_sentence():
    seen: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_first_child, args=(signal.SIGKILL, seen, stop))
    killer.start()
    try:
        with pytest.raises(KernelscopeError) as info:
            run_child(REPORT)
    finally:
        stop.set()
        killer.join()
    msg = str(info.value)
    assert seen, "the child was never seen"
    assert msg.startswith("The summary's process was stopped (SIGKILL, perhaps for lack of memory)")
    assert "\n" not in msg and msg.endswith(".") and "Traceback" not in msg


def _niceness(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])  # field 19
    except (OSError, IndexError, ValueError):
        return None


@pytest.mark.parametrize("background", [True, False])
def test_a_windows_child_runs_below_the_windows_priority(background):
    # a window's pan and zoom go first: the child lowers its priority once it starts (the CLI's does not)
    mine = os.nice(0)
    seen: dict[int, int] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for k in _overview_children():
                n = _niceness(k)
                if n is not None:
                    seen[k] = max(seen.get(k, n), n)
            time.sleep(0.002)

    t = threading.Thread(target=watch)
    t.start()
    try:
        got = run_child(REPORT, background=background)
    finally:
        stop.set()
        t.join()
    assert _json(got) == _json(_in_process(REPORT))
    assert seen, "the child was never seen"
    from engine.analysis.findings.overview_store import BACKGROUND_NICE
    want = min(mine + BACKGROUND_NICE, 19) if background else mine
    assert max(seen.values()) == want


def test_cancel_kills_the_child():
    from gui.workers import Cancelled
    cancel = threading.Event()
    seen: list[int] = []

    def cancel_when_started() -> None:
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            seen.extend(_overview_children())
            time.sleep(0.005)
        cancel.set()

    t = threading.Thread(target=cancel_when_started)
    t.start()
    with pytest.raises(Cancelled):
        run_child(REPORT, cancel=cancel)
    t.join()
    assert seen and not any(alive(pid) for pid in seen)


def test_store_and_load_follow_the_report_and_the_range(tmp_path):
    from engine.analysis.findings import overview_store

    copy = tmp_path / REPORT.name
    copy.write_bytes(REPORT.read_bytes())
    assert overview_store.load_cached(copy) is None
    got = _in_process(copy)
    overview_store.store(copy, None, got)
    back = overview_store.load_cached(copy)
    assert back is not None and _json(back) == _json(got)
    assert overview_store.load_cached(copy, "another range") is None
    copy.write_bytes(REPORT.read_bytes() + b"\0")  # the report changed: not the old result
    assert overview_store.load_cached(copy) is None


def test_window_summarizes_a_big_report_in_a_child_with_progress(qtbot, window, monkeypatch):
    """Every report counts as big here: the window's Summary and Findings show the child's result."""
    from engine.analysis import opened
    from engine.analysis.findings import overview_store

    monkeypatch.setattr(opened, "CHILD_EVENTS", 0)
    progress: list[str] = []
    window.reports.sig_summary_progress.connect(lambda r: progress.append(r.summary_progress))
    window.set_view("summary")
    report = open_and_wait(qtbot, window, REPORT)
    assert report.in_child() and report.summary_ready and report.summary_error is None
    assert progress and progress[0].startswith("In a separate process: ")
    assert _json((report.summary, report.findings)) == _json(_in_process(REPORT))
    view = window.views["summary"]
    qtbot.waitUntil(lambda: view.summary is not None, timeout=LOAD_TIMEOUT_MS)
    assert view.title.text() == REPORT.name
    cached = overview_store.load_cached(REPORT)
    assert cached is not None and _json(cached) == _json(_in_process(REPORT))
    screenshot(window, "summary_from_child_process")


def test_window_shows_the_sentence_of_a_killed_child(qtbot, window, monkeypatch):
    from engine.analysis import opened

    monkeypatch.setattr(opened, "CHILD_EVENTS", 0)
    seen: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(target=_kill_first_child, args=(signal.SIGKILL, seen, stop))
    killer.start()
    try:
        window.set_view("summary")
        report = open_and_wait(qtbot, window, REPORT)
    finally:
        stop.set()
        killer.join()
    assert seen
    msg = report.summary_error
    assert msg is not None and msg.startswith("The summary's process was stopped (SIGKILL")
    view = window.views["summary"]
    assert view.summary is None and view.ncu_notice.text() == msg
    assert any(msg in e for e in window.log.errors())
    # the Findings view says the same sentence instead of starting another child
    window.set_view("findings")
    fview = window.views["findings"]
    qtbot.waitUntil(lambda: not fview.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert fview.notes.text() == msg
    assert not _overview_children()
    screenshot(window, "summary_child_killed")


def test_stop_summary_kills_a_child_whoever_waits_on_it():
    """A view's thread asked for the summary first (no cancel of its own): closing the report
    still kills the child at once."""
    from engine.reports import open_report
    from gui.workers import Cancelled, LoadedReport

    trace = open_report(REPORT)
    report = LoadedReport(REPORT, trace, summary_in_child=True)
    raised: list[BaseException] = []

    def ask() -> None:
        try:
            report.ensure_summary()
        except BaseException as exc:  # noqa: BLE001 - checked below
            raised.append(exc)

    t = threading.Thread(target=ask)
    t.start()
    seen: list[int] = []
    deadline = time.monotonic() + 20
    while not seen and time.monotonic() < deadline:
        seen.extend(_overview_children())
        time.sleep(0.005)
    report.stop_summary()
    t.join(10)
    trace.close()
    assert not t.is_alive() and seen
    assert len(raised) == 1 and isinstance(raised[0], Cancelled)
    assert not any(alive(pid) for pid in seen) and not report.summary_ready


def test_second_open_loads_the_kept_summary_without_a_child(tmp_path):
    from engine.reports import open_report
    from gui.workers import LoadedReport

    copy = tmp_path / REPORT.name
    copy.write_bytes(REPORT.read_bytes())

    def summarize_once() -> tuple[LoadedReport, list[int]]:
        trace = open_report(copy)
        report = LoadedReport(copy, trace, summary_in_child=True)
        seen: list[int] = []
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                seen.extend(_overview_children())
                time.sleep(0.002)

        t = threading.Thread(target=watch)
        t.start()
        try:
            report.ensure_summary()
        finally:
            done.set()
            t.join()
            trace.close()
        return report, seen

    first, seen_first = summarize_once()
    second, seen_second = summarize_once()
    assert seen_first and not seen_second  # the second open read the cache
    assert second.summary_from_cache and not first.summary_from_cache
    assert _json((second.summary, second.findings)) == _json((first.summary, first.findings))
