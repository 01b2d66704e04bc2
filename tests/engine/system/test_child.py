"""engine.system.child: one real child process per test (progress, result, cancel, failures)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from engine.system.child import Child, run_child
from engine.system.errors import Cancelled, KernelscopeError
from tests.conftest import alive

CHILD = "tests.engine.system.child_example"
WHAT, HINT = "The example's process", "try again."


def _children() -> list[int]:
    """This process's running example children (from /proc)."""
    out = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            kids = Path(f"/proc/{os.getpid()}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for k in kids:
            try:
                if b"child_example" in Path(f"/proc/{k}/cmdline").read_bytes():
                    out.append(int(k))
            except OSError:
                continue
    return out


def test_the_result_and_the_stages_come_back():
    said: list[str] = []
    got = run_child(CHILD, {"payload": {"a": [1, 2]}, "sleep": 1.6}, what=WHAT, hint=HINT,
                    progress=said.append, poll_s=0.05)
    assert got == b'{"a": [1, 2]}'
    assert said[0] == "In a separate process: starting (0 s)"
    assert "In a separate process: first stage (1 s)" in said  # the stage the child said last
    assert all(s.startswith("In a separate process: ") for s in said)


def test_a_sentence_of_the_child_is_the_error():
    with pytest.raises(KernelscopeError) as info:
        run_child(CHILD, {"fail": True}, what=WHAT, hint=HINT)
    assert str(info.value) == "The example cannot do that. (it was asked to fail)"


def test_a_killed_child_gives_one_sentence():
    with pytest.raises(KernelscopeError) as info:
        run_child(CHILD, {"die": True}, what=WHAT, hint=HINT)
    assert str(info.value) == ("The example's process was stopped (SIGKILL, perhaps for lack of memory); "
                               "try again.")


def test_a_bug_in_the_child_gives_its_last_line():
    with pytest.raises(KernelscopeError) as info:
        run_child(CHILD, {"crash": True}, what=WHAT, hint=HINT)
    assert str(info.value) == "The example's process failed (exit status 1: RuntimeError: boom); try again."


def test_cancel_kills_the_child():
    cancel = threading.Event()
    seen: list[int] = []

    def cancel_when_started() -> None:
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            seen.extend(_children())
            time.sleep(0.005)
        cancel.set()

    t = threading.Thread(target=cancel_when_started)
    t.start()
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        run_child(CHILD, {"payload": None, "sleep": 60}, what=WHAT, hint=HINT, cancel=cancel, poll_s=0.05)
    t.join()
    assert seen and not any(alive(pid) for pid in seen)
    assert time.monotonic() - t0 < 30


def test_a_child_started_ahead_gets_its_arguments_then_its_request_and_bytes():
    """A :class:`Child` starts on its arguments; the request and bytes (a pickle, say) come later; with
    ``needs`` it runs without ``site`` (``python -S``), the package's folder on its path."""
    child = Child(CHILD, what=WHAT, hint=HINT, args=["report.ncu-rep", "0:3"], needs="numpy")
    pid, folder = child.proc.pid, child._tmp
    assert child.proc.poll() is None  # waiting for its request
    data = bytes(range(256)) * 1000
    child.send({"echo": True}, data)
    got = json.loads(child.result())
    assert got == {"argv": ["report.ncu-rep", "0:3"], "site": False, "data": data.hex()}
    assert not alive(pid) and not folder.exists()  # (its request, bytes and result were there)
    got = json.loads(run_child(CHILD, {"echo": True}, data=b"xy", what=WHAT, hint=HINT))
    assert got == {"argv": [], "site": True, "data": "7879"}


def test_a_child_past_its_time_limit_is_killed_with_one_sentence():
    t0 = time.monotonic()
    child = Child(CHILD, what=WHAT, hint=HINT)
    child.send({"payload": None, "sleep": 60})
    with pytest.raises(KernelscopeError) as info:
        child.result(timeout_s=0.5, poll_s=0.05)
    assert str(info.value) == "The example's process did not finish within 0.5 s and was stopped; try again."
    assert child.proc.returncode is not None and not alive(child.proc.pid)
    assert time.monotonic() - t0 < 30


def test_a_child_closed_unsent_is_ended_and_its_folder_removed():
    """A child started ahead whose work is not needed: closing it kills it and removes its files."""
    child = Child(CHILD, what=WHAT, hint=HINT)
    folder = child._tmp
    assert folder.is_dir()
    child.close()
    child.close()  # (twice: nothing more)
    assert child.proc.returncode is not None and not alive(child.proc.pid)
    assert not folder.exists()


def test_a_missing_package_or_module_says_so_in_one_sentence():
    with pytest.raises(KernelscopeError) as info:
        Child(CHILD, what=WHAT, hint=HINT, needs="no_such_package_here")
    assert str(info.value) == ("The example's process needs no_such_package_here, which is not installed; "
                               "try again.")
    with pytest.raises(KernelscopeError) as info:
        run_child("tests.engine.system.no_such_child", {}, what=WHAT, hint=HINT)
    assert str(info.value).startswith("The example's process failed (exit status 1: ")
    assert str(info.value).endswith("No module named tests.engine.system.no_such_child); try again.")


def test_a_killed_parents_folder_goes_at_the_next_start(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A parent killed outright leaves its ks-child folder; the next child's start deletes it."""
    import signal
    import subprocess
    import sys
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    parent = subprocess.Popen([sys.executable, "-c", (
        "from engine.system.child import Child\n"
        f"c = Child({CHILD!r}, what='x', hint='y')\n"
        "print(c._tmp, flush=True)\n"
        "import time; time.sleep(60)\n")], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[3])
    assert parent.stdout is not None
    left = Path(parent.stdout.readline().strip())
    assert left.is_dir() and left.parent == tmp_path
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert left.is_dir()  # killed: nothing deleted it
    stranger = tmp_path / "ks-child-notapid"  # a folder whose maker is unknown is left alone
    stranger.mkdir()
    assert run_child(CHILD, {"payload": [1]}, what=WHAT, hint=HINT) == b"[1]"
    assert not left.exists()
    assert stranger.is_dir()
