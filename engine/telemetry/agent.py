"""The telemetry agent: ``python -m engine.telemetry.agent [--period S] [--gpu N|all]``.

Runs on the host whose GPUs are sampled (usually through SSH, see
:mod:`engine.telemetry.remote`) and writes JSON lines on stdout:

- first a hello: ``{"agent": "kernelscope-telemetry", "version": 1, "ok": true, "host": ...,
  "reason": "NVML ready: ..."}`` (``ok`` false and the sentence when NVML is unavailable; the agent
  then exits with status 1);
- then one line per snapshot: ``{"t": epoch_ns, "gap": false, "gap_reason": null, "gpus": [{field:
  value, ...}]}`` with the :class:`~engine.telemetry.snapshot.GpuSample` fields (NA is null).

It stops when stdin reaches end of file (the SSH connection closed) or stdout is closed. Needs only
the standard library and nvidia-ml-py on the remote host (no pandas).
"""

from __future__ import annotations

import argparse
import json
import queue
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

from engine.telemetry.snapshot import SAMPLE_FIELDS, GpuSample, Snapshot

PROTOCOL_VERSION = 1
AGENT_NAME = "kernelscope-telemetry"


def snapshot_to_json(snap: Snapshot) -> str:
    """One JSON line (no newline) for a snapshot."""
    return json.dumps({
        "t": snap.timestamp_ns,
        "gap": snap.gap,
        "gap_reason": snap.gap_reason,
        "gpus": [[getattr(s, f) for f in SAMPLE_FIELDS] for s in snap.gpus],
    }, separators=(",", ":"))


def snapshot_from_json(line: str) -> Snapshot:
    """The snapshot of one agent line.

    Raises:
        ValueError: the line is not a snapshot line of this protocol.
    """
    d = json.loads(line)
    if not isinstance(d, dict) or "t" not in d or "gpus" not in d:
        raise ValueError(f"not a telemetry snapshot line: {line[:80]!r}")
    samples = []
    for values in d["gpus"]:
        if len(values) != len(SAMPLE_FIELDS):
            raise ValueError(f"a GPU sample has {len(values)} values, expected {len(SAMPLE_FIELDS)}")
        kw: dict[str, Any] = dict(zip(SAMPLE_FIELDS, values, strict=True))
        if kw["throttle_reasons"] is not None:
            kw["throttle_reasons"] = tuple(kw["throttle_reasons"])
        if kw["processes"] is not None:
            kw["processes"] = tuple((int(p[0]), str(p[1]), p[2]) for p in kw["processes"])
        samples.append(GpuSample(**kw))
    return Snapshot(int(d["t"]), tuple(samples), gap=bool(d.get("gap")), gap_reason=d.get("gap_reason"))


def _write(line: str) -> bool:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError, ValueError):
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Run the agent until stdin closes; returns the exit status."""
    from engine.system.nvml import nvml_available
    from engine.telemetry.errors import TelemetryError
    from engine.telemetry.sampler import Sampler
    from engine.telemetry.sources import NvmlSource

    ap = argparse.ArgumentParser(prog="python -m engine.telemetry.agent", description=__doc__)
    ap.add_argument("--period", type=float, default=0.1, help="seconds between samples (0.1)")
    ap.add_argument("--gpu", default="all", help="GPU index, comma list, or all")
    args = ap.parse_args(list(argv) if argv is not None else None)
    hello: dict[str, Any] = {"agent": AGENT_NAME, "version": PROTOCOL_VERSION, "host": socket.gethostname()}
    ok, reason = nvml_available()
    sampler = None
    if ok:
        try:
            sampler = Sampler(NvmlSource(), period_s=args.period, gpus=args.gpu)
        except ValueError as exc:
            ok, reason = False, str(exc)
    if ok and sampler is not None:
        outbox: queue.Queue[Snapshot] = queue.Queue(maxsize=1000)
        sampler.subscribe(lambda s: outbox.put(s) if not outbox.full() else None)
        try:
            sampler.start()
        except TelemetryError as exc:
            ok, reason = False, str(exc)
    if not _write(json.dumps(hello | {"ok": ok, "reason": reason})) or not ok or sampler is None:
        return 1 if not ok else 0

    closed = threading.Event()

    def watch_stdin() -> None:  # the SSH session closing ends stdin
        try:
            stdin: Any = sys.stdin.buffer
            while stdin.read1(4096):
                pass
        except (OSError, ValueError):
            pass
        closed.set()

    threading.Thread(target=watch_stdin, name="agent-stdin", daemon=True).start()
    try:
        while not closed.is_set():
            try:
                snap = outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            if not _write(snapshot_to_json(snap)):
                break
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
