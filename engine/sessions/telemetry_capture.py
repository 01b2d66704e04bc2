"""GPU telemetry recorded while a session's program runs, beside its reports.

The recording has absolute (epoch ns) timestamps, so
:func:`engine.telemetry.align.align_to_report` places it on the nsys report's timeline of the same
session. Locally it samples NVML; for an SSH target it runs the telemetry agent through the same
ssh options as the session. Telemetry never fails a session: when it cannot start (no driver,
no NVML on the host), the session runs anyway and its log says why.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.system.errors import KernelscopeError

TELEMETRY_FILE = "telemetry.csv"
#: which node the recording covers (see :func:`node_record`)
NODE_FILE = "telemetry.json"


def make_source(spec: Any) -> Any:
    """The telemetry source for ``spec``'s target (NVML here, the agent over ssh there)."""
    if spec.target.is_local:
        from engine.telemetry.sources import NvmlSource

        return NvmlSource()
    from engine.telemetry.remote import RemoteSource

    # the agent runs on the session's host with the session's environment (PYTHONPATH, PATH there)
    return RemoteSource.over_ssh(spec.target.ssh_target(), period_s=spec.telemetry_period_s,
                                 remote_env=dict(spec.env) or None)


def node_record(spec: Any, source: Any) -> dict[str, Any]:
    """Which node the telemetry of a session covers (written as ``telemetry.json`` beside it).

    One node: this machine for a local session, the SSH host for a remote one (the name its agent
    reported). A launcher that places ranks on other nodes (srun/mpirun over several nodes, torchrun
    with --nnodes) is sampled only on that node.
    """
    import socket

    from engine.sessions.launchers import detect

    local = spec.target.is_local
    hello = getattr(source, "hello", None) or {}
    node = socket.gethostname() if local else str(hello.get("host") or spec.target.ssh_target().display)
    launcher = detect(list(spec.command)) if getattr(spec, "command", None) else None
    covers = f"the GPUs of node {node} only"
    if launcher is not None:
        covers += (f"; ranks that {launcher.name} starts on other nodes are not sampled (record them with "
                   "`kernelscope telemetry --host NODE --record FILE` on each node)")
    return {"schema": "kernelscope.telemetry_node/1", "node": node,
            "target": "local" if local else spec.target.ssh_target().display,
            "source": "NVML" if local else "the telemetry agent over ssh",
            "file": TELEMETRY_FILE, "covers": covers}


@contextlib.contextmanager
def recording(spec: Any, folder: Path, note: Callable[[str], None],
              source_factory: Callable[[Any], Any] = make_source) -> Iterator[Path | None]:
    """Sample GPU telemetry into ``folder/telemetry.csv`` for the duration of the ``with`` block.

    Args:
        spec: The session spec (``telemetry``, ``telemetry_period_s``, ``target``).
        folder: The session folder.
        note: Writes one line to the session log.
        source_factory: Builds the telemetry source (a stand-in in tests without a GPU).

    Yields:
        The recording's path, or None when telemetry is off or could not start.
    """
    if not getattr(spec, "telemetry", False):
        yield None
        return
    from engine.telemetry.recording import Recorder
    from engine.telemetry.sampler import Sampler

    path = folder / TELEMETRY_FILE
    try:
        source = source_factory(spec)
        recorder = Recorder(path)
    except (KernelscopeError, OSError) as exc:
        note(f"GPU telemetry was not recorded: {exc}")
        yield None
        return
    sampler = Sampler(source, period_s=spec.telemetry_period_s)
    sampler.subscribe(recorder.write)  # on the sampler's thread: one CSV row per GPU per sample
    try:
        sampler.start()
    except KernelscopeError as exc:
        recorder.close()
        path.unlink(missing_ok=True)
        note(f"GPU telemetry was not recorded: {exc}")
        yield None
        return
    node = node_record(spec, source)
    try:
        (folder / NODE_FILE).write_text(json.dumps(node, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        note(f"could not write {NODE_FILE}: {exc.strerror}")
    note(f"recording GPU telemetry every {spec.telemetry_period_s:g} s to {path.name} (it covers "
         f"{node['covers']})")
    try:
        yield path
    finally:
        sampler.stop()
        recorder.close()
        note(f"GPU telemetry: {sampler.count} samples ({recorder.rows_written} rows) in {path.name}")
