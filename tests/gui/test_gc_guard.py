"""Python's cyclic GC runs on the GUI thread only once a window exists (a worker thread that
collected a Qt wrapper deadlocked the window in a CI run)."""

from __future__ import annotations

import gc
import threading

from gui import gc_guard


def test_window_turns_automatic_gc_off_and_collects_on_the_gui_thread(qtbot, window) -> None:
    guard = gc_guard.install()
    assert guard is not None and guard is gc_guard.install()  # one per application
    assert not gc.isenabled()
    collected_on: list[str] = []

    def cb(phase: str, _info: dict) -> None:
        if phase == "start":
            collected_on.append(threading.current_thread().name)

    gc.callbacks.append(cb)
    try:
        junk = []
        for _ in range(guard.threshold[0] * 3):  # cyclic garbage past the gen-0 threshold
            a: list = []
            a.append(a)
            junk.append(a)
        del junk, a

        # a worker thread allocating a lot must not collect
        def churn() -> None:
            for _ in range(guard.threshold[0] * 3):
                b: list = []
                b.append(b)

        t = threading.Thread(target=churn)
        t.start()
        t.join()
        assert collected_on == []
        # Like Python's own collector, the guard collects when allocations pass the threshold:
        # keep allocating on the GUI thread while its 500 ms timer runs.
        for _ in range(50):
            for _ in range(guard.threshold[0] * 2):
                c: list = []
                c.append(c)
            qtbot.wait(100)
            if collected_on:
                break
        assert set(collected_on) == {threading.main_thread().name}
    finally:
        gc.callbacks.remove(cb)
