"""Engine work in a child Python process: one protocol for its request, progress, cancel and result.

A big report's summary peaks at ~1.7 GB at 10M kernels; computed in a child, all of it goes back to
the OS when the child exits, and the caller loads the small result. The protocol, both sides here:

- **request**: the parent starts ``python -m MODULE`` (this engine first on ``PYTHONPATH``) and writes
  one JSON object on its stdin: the caller's fields, plus ``"result"``, a file in a private temporary
  folder;
- **progress and errors**: the child prints JSON lines on stdout, ``{"progress": "<stage>"}`` as it
  goes and, when it cannot do the work, ``{"error": "<one sentence>"}`` before exiting with status 1;
- **result**: bytes the child's handler returns, written atomically to ``"result"`` (exit status 0);
  the parent returns them to its caller, which decodes them (a pickle of its own types, say);
- **cancel**: the parent polls the caller's flag; once set it kills the child and raises
  :class:`~engine.system.errors.Cancelled`.

A child killed by a signal (the OOM killer), failing or leaving no result raises a
:class:`~engine.system.errors.KernelscopeError` with one sentence. The child's side is :func:`serve`::

    # engine/analysis/findings/overview_store.py
    if __name__ == "__main__":
        sys.exit(serve(handle, out_of_memory="The summary ran out of memory."))
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

#: Called with a short text: the child's stage and the seconds so far.
Progress = Callable[[str], None]
#: The child's work: (the request, a function that reports a stage) -> the result's bytes.
Handler = Callable[[dict[str, Any], Callable[[str], None]], bytes]


class CancelFlag(Protocol):
    """What the parent polls to stop early: a ``threading.Event`` or anything with ``is_set()``."""

    def is_set(self) -> bool:
        """True once the work should stop."""
        ...


def child_env() -> dict[str, str]:
    """This process's environment with this engine first on ``PYTHONPATH`` (the child imports it)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def signal_name(rc: int) -> str:
    """The name of the signal that ended a child with (negative) exit status ``rc``: 'SIGKILL'."""
    import signal

    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


class _Lines:
    """Reads the child's stdout in a thread: its latest stage and its error sentences."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.stage = "starting"
        self.errors: list[str] = []
        self._proc = proc
        self._thread = threading.Thread(target=self._run, name="ks-child-out", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                said = json.loads(line)
            except ValueError:  # a library printing on stdout: not the protocol's
                continue
            if not isinstance(said, dict):
                continue
            if isinstance(said.get("progress"), str):
                self.stage = said["progress"]
            elif isinstance(said.get("error"), str):
                self.errors.append(said["error"])

    def join(self) -> None:
        self._thread.join(timeout=5)


def _wait(proc: subprocess.Popen[str], lines: _Lines, progress: Progress | None,
          cancel: CancelFlag | None, poll_s: float) -> int:
    """Wait for the child, reporting its stage about once a second; kill it on cancel."""
    from engine.system.errors import Cancelled

    t0 = time.monotonic()
    last = 0.0
    if progress is not None:  # at once: a quick child can be done before the first poll
        progress(f"In a separate process: {lines.stage} (0 s)")
    try:
        while True:
            try:
                rc: int | None = proc.wait(timeout=poll_s)
            except subprocess.TimeoutExpired:
                rc = None
            if cancel is not None and cancel.is_set():
                raise Cancelled  # (also when the child has just finished: its result is not wanted)
            if rc is not None:
                return rc
            now = time.monotonic() - t0
            if progress is not None and now - last >= 1.0:
                last = now
                progress(f"In a separate process: {lines.stage} ({now:.0f} s)")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        lines.join()


def run_child(module: str, request: dict[str, Any], *, what: str, hint: str,
              progress: Progress | None = None, cancel: CancelFlag | None = None,
              poll_s: float = 0.25, env: dict[str, str] | None = None) -> bytes:
    """Run ``python -m module`` on ``request`` and return the bytes of its result.

    Args:
        module: the child's module; its ``__main__`` calls :func:`serve`.
        request: JSON-able fields for the child's handler (``"result"`` is added here).
        what: the child in a sentence's subject, e.g. "The summary's process".
        hint: what the user can do, ending a failure's sentence, e.g. "reopen the report to try again."
        progress: gets "In a separate process: <stage> (<seconds> s)" at once and about once a second.
        cancel: once set, the child is killed and :class:`~engine.system.errors.Cancelled` raised.
        poll_s: how often ``cancel`` is looked at.
        env: the child's environment (default :func:`child_env`).

    Raises:
        Cancelled: ``cancel`` was set.
        KernelscopeError: the child said why it failed, was killed, failed otherwise or left no result.

    """
    from engine.system.errors import KernelscopeError

    with tempfile.TemporaryDirectory(prefix="ks-child-") as tmp:
        out = Path(tmp) / "result"
        err_path = Path(tmp) / "stderr.txt"
        with open(err_path, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", module], env=env or child_env(),
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
            try:
                assert proc.stdin is not None
                proc.stdin.write(json.dumps({**request, "result": str(out)}))
                proc.stdin.close()
            except OSError:  # the child died before reading: its exit status says how
                pass
            lines = _Lines(proc)
            rc = _wait(proc, lines, progress, cancel, poll_s)
        if rc == 0:
            try:
                return out.read_bytes()
            except OSError:
                raise KernelscopeError(f"{what} finished without a result; {hint}") from None
        if lines.errors:
            raise KernelscopeError(lines.errors[-1])
        if rc < 0:
            raise KernelscopeError(f"{what} was stopped ({signal_name(rc)}, perhaps for lack of memory); "
                                   f"{hint}")
        tail = [ln for ln in err_path.read_text(errors="replace").splitlines() if ln.strip()]
        why = f": {tail[-1].strip()}" if tail else ""
        raise KernelscopeError(f"{what} failed (exit status {rc}{why}); {hint}")


def say(**fields: str) -> None:
    """Print one protocol line (``progress=...`` or ``error=...``) on stdout, flushed."""
    print(json.dumps(fields), flush=True)


def serve(handler: Handler, *, out_of_memory: str = "The work ran out of memory.") -> int:
    """The child's side: read the request from stdin, run ``handler``, write its result; the exit status.

    A :class:`~engine.system.errors.KernelscopeError` (or running out of memory) becomes one
    ``{"error": ...}`` line and exit status 1; anything else is a bug, left to print its traceback.
    """
    from engine.system.atomic import atomic_write_bytes
    from engine.system.errors import KernelscopeError

    request = json.loads(sys.stdin.read() or "{}")
    try:
        data = handler(request, lambda text: say(progress=text))
        atomic_write_bytes(request["result"], data, fsync=False)
    except KernelscopeError as exc:
        say(error=" ".join(str(exc).split()))
        return 1
    except MemoryError:
        say(error=out_of_memory)
        return 1
    return 0
