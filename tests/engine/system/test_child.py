"""engine.system.child: one real child process per test (progress, result, cancel, failures)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from engine.system.child import run_child
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
