"""One background thread turning a :class:`~engine.telemetry.sources.Source` into a snapshot stream.

The thread is the only one that touches the source (and so NVML). Each tick produces an immutable
:class:`~engine.telemetry.snapshot.Snapshot` into a bounded ring buffer; views render
:meth:`Sampler.latest`. Live sources are read on a fixed grid of ``period_s`` measured with the
monotonic clock (no drift; ticks missed because a read was slow are skipped, not bunched up),
while the snapshots carry wall-clock ``time.time_ns()`` timestamps.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from types import TracebackType

from engine.telemetry.snapshot import Snapshot, parse_gpu_selection
from engine.telemetry.sources import Source

log = logging.getLogger(__name__)

Callback = Callable[[Snapshot], None]


class Sampler:
    """Samples ``source`` every ``period_s`` seconds on one background thread.

    Args:
        source: An :class:`~engine.telemetry.sources.NvmlSource`, a
            :class:`~engine.telemetry.sources.ReplaySource`, or anything with the same methods.
            A replay source keeps its own clock, and ``period_s`` is then unused.
        period_s: Seconds between live samples (0.1 = 10 Hz).
        gpus: ``"all"``, one index, ``"0,2"`` or a list of indices.
        ring_size: How many snapshots :meth:`history` keeps (the oldest are dropped).

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, source: Source, period_s: float = 0.1, gpus: str | int | Iterable[int] = "all",
                 ring_size: int = 3000) -> None:
        if not period_s > 0:
            raise ValueError(f"period_s must be positive, not {period_s}.")
        if ring_size < 1:
            raise ValueError(f"ring_size must be at least 1, not {ring_size}.")
        self.source = source
        self.period_s = float(period_s)
        self.gpus = parse_gpu_selection(gpus)
        self._ring: deque[Snapshot] = deque(maxlen=ring_size)
        self._lock = threading.Lock()
        self._subscribers: list[Callback] = []
        self._stop = threading.Event()
        # Held while running; stop() releases it. Waiting on it with a timeout is one futex wait,
        # where Event.wait(timeout) allocates a lock and takes three (measured: 174 vs 120 us of
        # CPU per wake on the dev VM; per-tick waits are most of an idle sampler's cost).
        self._stop_lock = threading.Lock()
        self._stop_lock.acquire()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.count = 0  # snapshots produced
        self.missed_ticks = 0  # live ticks skipped because a read overran its slot

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> Sampler:
        """Open the source (on the calling thread, so errors reach the caller) and start sampling.

        Raises:
            TelemetryError: the source cannot be opened (e.g. no NVIDIA driver); the message is one
                sentence for the user.
        """
        if self._thread is not None:
            raise RuntimeError("Sampler.start() was already called.")
        self.source.open(self.gpus)
        self._thread = threading.Thread(target=self._run, name="kernelscope-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = 5.0) -> None:
        """Ask the thread to stop, wait for it (join), and close the source. Safe to call twice."""
        with self._lock:
            if not self._stop.is_set():
                self._stop.set()
                self._stop_lock.release()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the stream ends (a replay reached its end, or :meth:`stop`); True if it did."""
        return self._done.wait(timeout)

    @property
    def running(self) -> bool:
        """True while the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- reading -------------------------------------------------------------------------------
    def latest(self) -> Snapshot | None:
        """The newest snapshot (immutable), or None before the first one."""
        with self._lock:
            return self._ring[-1] if self._ring else None

    def history(self, n: int | None = None) -> list[Snapshot]:
        """The last ``n`` snapshots (all kept ones if None), oldest first, as a new list."""
        with self._lock:
            items = list(self._ring)
        return items if n is None else items[-n:] if n > 0 else []

    def subscribe(self, callback: Callback) -> Callable[[], None]:
        """Call ``callback(snapshot)`` for every new snapshot.

        Callbacks run **on the sampler thread**: keep them short (e.g. put the snapshot in a
        queue, or emit a Qt signal, which is queued to the GUI thread). An exception in a callback
        is logged and does not stop sampling.

        Returns:
            A function that unsubscribes the callback.
        """
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    # -- the thread ----------------------------------------------------------------------------
    def _publish(self, snap: Snapshot) -> None:
        with self._lock:
            self._ring.append(snap)
            self.count += 1
            subscribers = list(self._subscribers)
        for cb in subscribers:
            try:
                cb(snap)
            except Exception:  # noqa: BLE001 - a broken view must not stop telemetry
                log.exception("telemetry subscriber %r failed", cb)

    def _read_once(self) -> Snapshot | None:
        try:
            snap = self.source.read(self._stop)
        except Exception as exc:  # noqa: BLE001 - a failure is a gap in the stream, not its end
            return Snapshot(time.time_ns(), (), gap=True,
                            gap_reason=f"Sampling failed ({type(exc).__name__}: {exc}); sampling continues.")
        return None if snap is None else snap.select(self.gpus)

    def _run(self) -> None:
        try:
            if self.source.paced:
                while not self._stop.is_set():
                    snap = self._read_once()
                    if snap is None:
                        break
                    self._publish(snap)
            else:
                self._run_grid()
        finally:
            try:
                self.source.close()
            except Exception:  # noqa: BLE001 - close must not mask anything
                log.exception("closing the telemetry source failed")
            self._done.set()

    def _run_grid(self) -> None:
        period = self.period_s
        t0 = time.monotonic()
        tick = 0
        while not self._stop.is_set():
            snap = self._read_once()
            if snap is not None:
                self._publish(snap)
            tick += 1
            now = time.monotonic()
            due = t0 + tick * period
            if now >= due:  # overran: skip to the next grid point still in the future
                nxt = math.floor((now - t0) / period) + 1
                self.missed_ticks += nxt - tick
                tick = nxt
                due = t0 + tick * period
            if self._stop_lock.acquire(timeout=max(0.0, due - now)):
                self._stop_lock.release()
                break
