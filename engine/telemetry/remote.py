"""Telemetry from another host: the agent (:mod:`engine.telemetry.agent`) run through SSH.

:class:`RemoteSource` starts the agent with an argv (for SSH: :func:`ssh_agent_argv`, built with the
sessions engine's :func:`~engine.system.ssh.ssh_argv`), reads its JSON lines on a reader thread,
and turns them into snapshots. When the connection drops (the agent or ssh exits, the network goes),
it yields one gap snapshot saying so and reconnects with back-off (1, 2, 4 ... 10 s) until stopped;
each failed attempt is another gap. The agent's own gaps (NVML failing remotely) pass through.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any

from engine.telemetry.agent import AGENT_NAME, snapshot_from_json
from engine.telemetry.errors import TelemetryError, TelemetryUnavailable
from engine.telemetry.snapshot import Snapshot

if TYPE_CHECKING:
    from engine.system.ssh import SshTarget

HELLO_TIMEOUT_S = 30.0
SILENCE_TIMEOUT_S = 10.0  # no line for this long (10 s at any period <= 1 s) = connection lost
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 10.0)


def agent_command(period_s: float = 0.1, gpus: str = "all", python: str = "python3") -> list[str]:
    """The argv that runs the agent on the remote host (pure; tested)."""
    return [python, "-m", "engine.telemetry.agent", "--period", f"{period_s:g}", "--gpu", gpus]


def ssh_agent_argv(target: SshTarget, period_s: float = 0.1, gpus: str = "all", python: str = "python3",
                   remote_dir: str | None = None, remote_env: dict[str, str] | None = None) -> list[str]:
    """The local argv that runs the agent on ``target`` through ssh (pure; tested).

    Args:
        target: The host.
        period_s: Sampling period on the remote host.
        gpus: ``all`` or indices.
        python: The remote Python (needs nvidia-ml-py, and Kernelscope importable).
        remote_dir: A remote Kernelscope checkout to run from (cd into), when it is not installed.
        remote_env: Extra environment variables for the agent (``env NAME=VALUE ...``).
    """
    from engine.system.ssh import ssh_argv

    cmd = agent_command(period_s, gpus, python)
    if remote_env:
        cmd = ["env", *(f"{k}={v}" for k, v in sorted(remote_env.items())), *cmd]
    return ssh_argv(target, cmd, cwd=remote_dir)


class RemoteSource:
    """Snapshots streamed by an agent process (through SSH, or any argv that runs one).

    Args:
        argv: How to start the agent; called again for every reconnect when it is a function.
        label: The host as the user knows it, for sentences ("gpu1", "ana@gpu1:2200").
        env: Environment for the local process (None: inherit).
        explain: Turns (exit status, stderr) into a sentence, e.g. ssh's host-key or auth failures.
    """

    paced = True

    def __init__(self, argv: Sequence[str] | Callable[[], Sequence[str]], label: str,
                 env: dict[str, str] | None = None,
                 explain: Callable[[int, str], str | None] | None = None) -> None:
        self._argv = argv
        self.label = label
        self.env = env
        self.explain = explain
        self.proc: subprocess.Popen[bytes] | None = None
        self.hello: dict[str, Any] = {}
        self.reconnects = 0
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: list[str] = []
        self._down_since: float | None = None
        self._attempt = 0
        self._next_try = 0.0

    @classmethod
    def over_ssh(cls, target: SshTarget, period_s: float = 0.1, gpus: str = "all", python: str = "python3",
                 remote_dir: str | None = None, remote_env: dict[str, str] | None = None) -> RemoteSource:
        """A source that runs the agent on ``target`` through the system's ssh."""
        from engine.system.ssh import explain_ssh_failure

        argv = ssh_agent_argv(target, period_s, gpus, python, remote_dir, remote_env)
        return cls(argv, target.display, explain=lambda rc, err: explain_ssh_failure(target, rc, err))

    # -- the process -----------------------------------------------------------------------------
    def _start(self, stop: threading.Event | None = None) -> None:
        argv = list(self._argv() if callable(self._argv) else self._argv)
        self._lines = queue.Queue()
        self._stderr = []
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=None if self.env is None else os.environ | self.env,
            )
        except OSError as exc:
            raise TelemetryUnavailable(
                f"Could not start {argv[0]} to reach {self.label} ({exc.strerror}); install OpenSSH's client."
            ) from exc
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout, self._lines), daemon=True,
                         name="telemetry-remote-out").start()
        threading.Thread(target=self._drain, args=(self.proc.stderr, self._stderr), daemon=True,
                         name="telemetry-remote-err").start()
        line = self._next_line(HELLO_TIMEOUT_S, stop)
        reason = self._failure_sentence("did not answer")
        if line is None:
            self._kill()
            raise TelemetryUnavailable(reason)
        try:
            hello = json.loads(line)
        except ValueError:
            hello = {}
        if not isinstance(hello, dict) or hello.get("agent") != AGENT_NAME:
            self._kill()
            raise TelemetryUnavailable(
                f"{self.label} did not start the Kernelscope telemetry agent (it said {line[:120]!r}); "
                "install Kernelscope there or pass its folder with --remote-dir."
            )
        self.hello = hello
        if not hello.get("ok"):
            self._kill()
            raise TelemetryUnavailable(f"On {self.label}: {hello.get('reason')}")

    @staticmethod
    def _pump(stream: IO[bytes], out: queue.Queue[bytes | None]) -> None:
        try:
            for line in iter(stream.readline, b""):
                out.put(line)
        except (OSError, ValueError):
            pass
        out.put(None)

    @staticmethod
    def _drain(stream: IO[bytes], out: list[str]) -> None:
        try:
            for line in iter(stream.readline, b""):
                if len(out) < 200:
                    out.append(line.decode(errors="replace").rstrip())
        except (OSError, ValueError):
            pass

    def _next_line(self, timeout: float, stop: threading.Event | None = None) -> str | None:
        """The next stdout line, or None on end of stream, silence past ``timeout``, or stop."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (stop is not None and stop.is_set()):
                return None
            try:
                raw = self._lines.get(timeout=min(left, 0.1))
            except queue.Empty:
                continue
            return None if raw is None else raw.decode(errors="replace").strip()

    def _failure_sentence(self, what: str) -> str:
        proc = self.proc
        rc = None
        if proc is not None:
            try:
                rc = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                rc = None
        err = "\n".join(self._stderr[-20:])
        if rc is not None and self.explain is not None:
            explained = self.explain(rc, err)
            if explained:
                return explained
        last = err.strip().splitlines()[-1] if err.strip() else ""
        status = "" if rc is None else f", exit status {rc}"
        return f"The telemetry agent on {self.label} {what}{status}" + (f": {last}" if last else "") + "."

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        for stream in (proc.stdin,):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for stream in (proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass

    # -- Source ----------------------------------------------------------------------------------
    def open(self, gpus: frozenset[int] | None = None) -> None:
        """Start the agent and wait for its hello (the sampler's GPU selection applies on top).

        Raises:
            TelemetryUnavailable: ssh failed (with ssh's reason), the agent is missing, or NVML is
                unavailable on the remote host.
        """
        self._start()

    def read(self, stop: threading.Event | None = None) -> Snapshot | None:
        """The next snapshot; a gap snapshot when the connection is lost or a reconnect fails."""
        stop = stop or threading.Event()
        while not stop.is_set():
            if self.proc is None:
                gap = self._reconnect(stop)
                if gap is not None:
                    return gap
                continue
            line = self._next_line(SILENCE_TIMEOUT_S, stop)
            if stop.is_set():
                return None
            if line is None:
                why = self._failure_sentence("stopped answering")
                self._kill()
                self._down_since = time.monotonic()
                self._attempt = 0
                self._next_try = time.monotonic() + BACKOFF_S[0]
                return Snapshot(time.time_ns(), (), gap=True,
                                gap_reason=f"Lost the connection to {self.label} ({why}); reconnecting.")
            if not line:
                continue
            try:
                return snapshot_from_json(line)
            except (ValueError, TypeError, KeyError) as exc:
                return Snapshot(time.time_ns(), (), gap=True,
                                gap_reason=f"{self.label} sent a line that is not telemetry ({exc}).")
        return None

    def _reconnect(self, stop: threading.Event) -> Snapshot | None:
        wait = self._next_try - time.monotonic()
        if wait > 0 and stop.wait(wait):
            return None
        try:
            self._start(stop)
        except TelemetryError as exc:
            self._attempt += 1
            self._next_try = time.monotonic() + BACKOFF_S[min(self._attempt, len(BACKOFF_S) - 1)]
            return Snapshot(time.time_ns(), (), gap=True,
                            gap_reason=f"Reconnecting to {self.label} failed ({exc}); trying again.")
        self.reconnects += 1
        self._down_since = None
        return None

    def close(self) -> None:
        """Stop the agent (closing its stdin ends it; killed if it does not). Never raises."""
        try:
            self._kill()
        except Exception:  # noqa: BLE001, S110 - close never raises
            pass
