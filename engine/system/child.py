"""Engine work in a child Python process: one protocol for its request, progress, cancel and result.

A big report's summary peaks at ~1.7 GB at 10M kernels; computed in a child, all of it goes back to
the OS when the child exits, and the caller loads the small result. Every child of the engine (the
summary, the page reader's second core, ``ncu_report``'s decoders and units) speaks this protocol;
both sides are here:

- **start**: the parent starts ``python -m MODULE [ARGS]`` with this engine first on ``PYTHONPATH``
  (or, for a child that needs one package only, ``python -S`` with that package's folder: no
  ``site``, ~70 ms less). ``ARGS`` let a child begin before its request is known (an ``ncu_report``
  decoder opens the report while the parent still plans the work);
- **request**: one JSON object on the child's stdin: the caller's fields, plus ``"result"``, a file
  in a private temporary folder, and (when the caller has bytes to send, a pickle of its own types
  say) ``"data"``, a file in that folder holding them (:func:`request_data`);
- **progress and errors**: the child prints JSON lines on stdout, ``{"progress": "<stage>"}`` as it
  goes and, when it cannot do the work, ``{"error": "<one sentence>"}`` before exiting with status 1;
- **result**: bytes the child's handler returns, written atomically to ``"result"`` (exit status 0);
  the parent returns them to its caller, which decodes them (JSON, a pickle of its own types);
- **cancel and time limit**: the parent polls the caller's flag; once set it kills the child and
  raises :class:`~engine.system.errors.Cancelled`. Past the caller's time limit it kills it too.

A child killed by a signal (the OOM killer), failing, running past its time limit or leaving no
result raises a :class:`~engine.system.errors.KernelscopeError` with one sentence. The child's side
is :func:`serve`::

    # engine/analysis/findings/overview_child.py
    if __name__ == "__main__":
        sys.exit(serve(handle, out_of_memory="The summary ran out of memory."))

The parent's side is :func:`run_child` (start, send, wait: one call), or a :class:`Child` started
ahead and sent its request later.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.system import scratch

if TYPE_CHECKING:  # (the child's side imports none of the parent's modules: it starts sooner)
    import subprocess

#: Called with a short text: the child's stage and the seconds so far.
Progress = Callable[[str], None]
#: The child's work: (the request, a function that reports a stage) -> the result's bytes.
Handler = Callable[[dict[str, Any], Callable[[str], None]], bytes]


class CancelFlag(Protocol):
    """What the parent polls to stop early: a ``threading.Event`` or anything with ``is_set()``."""

    def is_set(self) -> bool:
        """True once the work should stop."""
        ...


def _repo() -> str:
    return str(Path(__file__).resolve().parents[2])


def child_env() -> dict[str, str]:
    """This process's environment with this engine first on ``PYTHONPATH`` (the child imports it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_repo(), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def bare_env(package: str) -> dict[str, str] | None:
    """The environment of a ``python -S`` child: this engine and ``package``'s folder on ``PYTHONPATH``.

    ``-S`` skips ``site`` (its ``.pth`` files cost ~70 ms of a child's start): the child then finds
    only this engine and what is beside ``package``. None when ``package`` is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    where = str(Path(next(iter(spec.submodule_search_locations))).parent)
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [_repo(), where, os.environ.get("PYTHONPATH")])))


def signal_name(rc: int) -> str:
    """The name of the signal that ended a child with (negative) exit status ``rc``: 'SIGKILL'."""
    import signal

    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


class _Lines:
    """Reads the child's stdout in a thread: its latest stage, its error sentences, its end."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        import threading

        self.stage = "starting"
        self.errors: list[str] = []
        self.ended = threading.Event()  # stdout closed: the child is ending (wakes the parent at once)
        self._proc = proc
        self._thread = threading.Thread(target=self._run, name="ks-child-out", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._proc.stdout is not None
        try:
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
        finally:
            self.ended.set()

    def join(self) -> None:
        self._thread.join(timeout=5)


class Child:
    """One child process of this protocol: started now, sent its request later, waited for once.

    Args:
        module: the child's module; its ``__main__`` calls :func:`serve`.
        what: the child in a sentence's subject, e.g. "The summary's process".
        hint: what the user can do, ending a failure's sentence, e.g. "reopen the report to try again."
        args: the child's command-line arguments (what it can start on before its request comes).
        env: the child's environment (default :func:`child_env`, or :func:`bare_env` with ``needs``).
        needs: the one package the child imports besides this engine: it starts without ``site``.

    Raises:
        KernelscopeError: ``needs`` is not installed or the child cannot be started.

    """

    def __init__(self, module: str, *, what: str, hint: str, args: Sequence[str] = (),
                 env: dict[str, str] | None = None, needs: str | None = None) -> None:
        import subprocess

        from engine.system.errors import KernelscopeError

        self.what, self.hint = what, hint
        flags: list[str] = []
        if needs is not None:
            env = env or bare_env(needs)
            if env is None:
                raise KernelscopeError(f"{what} needs {needs}, which is not installed; {hint}")
            flags = ["-S"]
        self._tmp = scratch.make("ks-child-")  # (a killed parent's folder goes at a later start)
        self._result = self._tmp / "result"
        self._stderr = self._tmp / "stderr.txt"
        try:
            with open(self._stderr, "wb") as err:
                self.proc = subprocess.Popen([sys.executable, *flags, "-m", module, *args],
                                             env=env or child_env(), stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=err, text=True)
        except OSError as exc:
            self._remove_folder()
            raise KernelscopeError(f"{what} could not be started ({exc.strerror or exc}); {hint}") from None
        self._lines = _Lines(self.proc)
        self._closed = False

    def send(self, request: dict[str, Any], data: bytes | None = None) -> None:
        """Write the request (and ``data``, in the file named by its ``"data"``); the child starts on it.

        Raises:
            KernelscopeError: ``data`` could not be written (the child is ended).

        """
        from engine.system.errors import KernelscopeError

        full = {**request, "result": str(self._result)}
        if data is not None:
            try:
                (self._tmp / "data").write_bytes(data)
            except OSError as exc:  # (a full disk, say)
                self.close()
                raise KernelscopeError(f"{self.what} could not be given its work ({exc.strerror or exc}); "
                                       f"{self.hint}") from None
            full["data"] = str(self._tmp / "data")
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(full))
            self.proc.stdin.close()
        except OSError:  # the child died before reading: its exit status says how
            pass

    def result(self, *, progress: Progress | None = None, cancel: CancelFlag | None = None,
               poll_s: float = 0.25, timeout_s: float | None = None) -> bytes:
        """Wait for the child (sent its request) and return the bytes of its result; ends the child.

        Args:
            progress: gets "In a separate process: <stage> (<seconds> s)" at once and about once a second.
            cancel: once set, the child is killed and :class:`~engine.system.errors.Cancelled` raised.
            poll_s: how often ``cancel`` is looked at.
            timeout_s: past this the child is killed and a :class:`KernelscopeError` raised.

        Raises:
            Cancelled: ``cancel`` was set.
            KernelscopeError: the child said why it failed, ran past ``timeout_s``, was killed, failed
                otherwise or left no result.

        """
        try:
            rc = self._wait(progress, cancel, poll_s, timeout_s)
            return self._outcome(rc)
        finally:
            self.close()

    def _wait(self, progress: Progress | None, cancel: CancelFlag | None, poll_s: float,
              timeout_s: float | None) -> int:
        """Wait for the child, reporting its stage about once a second; kill it on cancel or time-out."""
        import subprocess

        from engine.system.errors import Cancelled, KernelscopeError

        proc, lines = self.proc, self._lines
        t0 = time.monotonic()
        last = 0.0
        if progress is not None:  # at once: a quick child can be done before the first poll
            progress(f"In a separate process: {lines.stage} (0 s)")
        try:
            while True:
                rc: int | None = None
                if lines.ended.wait(poll_s):  # (its stdout closed: it is ending; waited for below)
                    try:
                        rc = proc.wait(timeout=poll_s)
                    except subprocess.TimeoutExpired:
                        rc = None
                if cancel is not None and cancel.is_set():
                    raise Cancelled  # (also when the child has just finished: its result is not wanted)
                if rc is not None:
                    return rc
                now = time.monotonic() - t0
                if timeout_s is not None and now > timeout_s:
                    raise KernelscopeError(f"{self.what} did not finish within {timeout_s:g} s and was "
                                           f"stopped; {self.hint}")
                if progress is not None and now - last >= 1.0:
                    last = now
                    progress(f"In a separate process: {lines.stage} ({now:.0f} s)")
        finally:
            if proc.returncode is None:
                proc.kill()
                proc.wait()
            lines.join()

    def _outcome(self, rc: int) -> bytes:
        """The result's bytes for exit status ``rc``, or the one sentence that says why there are none."""
        from engine.system.errors import KernelscopeError

        what, hint = self.what, self.hint
        if rc == 0:
            try:
                return self._result.read_bytes()
            except OSError:
                raise KernelscopeError(f"{what} finished without a result; {hint}") from None
        if self._lines.errors:
            raise KernelscopeError(self._lines.errors[-1])
        if rc < 0:
            raise KernelscopeError(f"{what} was stopped ({signal_name(rc)}, perhaps for lack of memory); "
                                   f"{hint}")
        tail = [ln for ln in self._stderr.read_text(errors="replace").splitlines() if ln.strip()]
        why = f": {tail[-1].strip()}" if tail else ""
        raise KernelscopeError(f"{what} failed (exit status {rc}{why}); {hint}")

    def close(self) -> None:
        """End the child if it still runs (its result is not wanted) and remove its folder; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        self._lines.join()
        self._remove_folder()

    def _remove_folder(self) -> None:
        import shutil

        shutil.rmtree(self._tmp, ignore_errors=True)


def run_child(module: str, request: dict[str, Any], *, what: str, hint: str,
              progress: Progress | None = None, cancel: CancelFlag | None = None,
              poll_s: float = 0.25, env: dict[str, str] | None = None, data: bytes | None = None,
              needs: str | None = None, timeout_s: float | None = None) -> bytes:
    """Run ``python -m module`` on ``request`` and return the bytes of its result.

    Args:
        module: the child's module; its ``__main__`` calls :func:`serve`.
        request: JSON-able fields for the child's handler (``"result"``, ``"data"`` are added here).
        what: the child in a sentence's subject, e.g. "The summary's process".
        hint: what the user can do, ending a failure's sentence, e.g. "reopen the report to try again."
        progress: gets "In a separate process: <stage> (<seconds> s)" at once and about once a second.
        cancel: once set, the child is killed and :class:`~engine.system.errors.Cancelled` raised.
        poll_s: how often ``cancel`` is looked at.
        env: the child's environment (default :func:`child_env`).
        data: bytes sent beside the request (:func:`request_data` reads them in the child).
        needs: the one package the child imports besides this engine (see :class:`Child`).
        timeout_s: past this the child is killed and a :class:`KernelscopeError` raised.

    Raises:
        Cancelled: ``cancel`` was set.
        KernelscopeError: the child could not start, said why it failed, ran past ``timeout_s``, was
            killed, failed otherwise or left no result.

    """
    child = Child(module, what=what, hint=hint, env=env, needs=needs)
    try:
        child.send(request, data)
    except BaseException:
        child.close()
        raise
    return child.result(progress=progress, cancel=cancel, poll_s=poll_s, timeout_s=timeout_s)


def say(**fields: str) -> None:
    """Print one protocol line (``progress=...`` or ``error=...``) on stdout, flushed."""
    print(json.dumps(fields), flush=True)


def request_data(request: dict[str, Any]) -> bytes:
    """The child's side: the bytes the parent sent beside ``request`` (``run_child(..., data=...)``)."""
    return Path(request["data"]).read_bytes()


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
