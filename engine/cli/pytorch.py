"""``kernelscope ops``, ``modules`` and ``memory``: the PyTorch views on the command line."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    """Add ``ops``, ``modules`` and ``memory`` to the ``kernelscope`` parser."""
    o = sub.add_parser("ops", help="PyTorch operators: calls, host self/total, GPU time of their kernels")
    o.add_argument("input", metavar="REPORT", help="a Kineto trace or an nsys report with PyTorch NVTX")
    o.add_argument("--by", choices=["name", "shapes"], default="name",
                   help="group by operator name (default) or by name and input shapes")
    o.add_argument("--kernels", action="store_true", help="also list the kernels with their operator "
                   "and tensor-core use")
    o.add_argument("--limit", type=int, default=40, metavar="N", help="rows to print (default 40)")
    o.add_argument("--json", action="store_true", help="print kernelscope.ops/1 JSON (every row)")
    o.set_defaults(func=cmd_ops)

    m = sub.add_parser("modules", help="time per nn.Module as a tree, forward and backward apart")
    m.add_argument("input", metavar="REPORT")
    m.add_argument("--json", action="store_true", help="print kernelscope.modules/1 JSON")
    m.set_defaults(func=cmd_modules)

    y = sub.add_parser("memory", help="GPU memory over time: peaks, and what was alive at the peak")
    y.add_argument("input", metavar="REPORT", help="a Kineto trace (profile_memory=True), an nsys report "
                   "(--cuda-memory-usage=true) or a torch.cuda.memory snapshot pickle")
    y.add_argument("--json", action="store_true", help="print kernelscope.memory/1 JSON")
    y.set_defaults(func=cmd_memory)


def _open(path: str) -> Any:
    from engine.reports import open_report

    return open_report(Path(path), cancel=threading.Event())


def _print(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=1, allow_nan=False) + "\n")


def _kept(args: argparse.Namespace, command: str, make: Any) -> None:
    """Print what ``make()`` prints, kept on disk under the report's identity (and the engine's code).

    The PyTorch tables of a multi-GB trace take seconds to build from its columns; a later ``ops``,
    ``modules`` or ``memory`` with the same options prints the kept text. A cache that cannot be
    read or written only costs the speed-up.
    """
    import contextlib
    import io

    from engine.system.cache import file_identity, result_get, result_put

    options = {k: v for k, v in sorted(vars(args).items()) if k not in ("func", "input")}
    key = f"cli-{command}-" + "-".join(f"{k}={v}" for k, v in options.items()).replace("/", "_")
    try:
        identity: str | None = file_identity(Path(args.input).expanduser())
    except OSError:
        identity = None
    text = result_get(identity, key) if identity else None
    if text is None:
        from engine.cli.cached import prepare

        prepare(args.input)  # a Kineto trace's first question keeps what every later one asks
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            make()
        text = buf.getvalue()
        if identity:
            result_put(identity, key, text)
    sys.stdout.write(text)


def cmd_ops(args: argparse.Namespace) -> int:
    """The operator table (and with ``--kernels`` the kernel table)."""
    _kept(args, "ops", lambda: _ops(args))
    return 0


def _ops(args: argparse.Namespace) -> int:
    from engine.analysis.pytorch import kept_results as kept
    from engine.analysis.pytorch.text import kernels_text, ops_json, ops_text

    trace = _open(args.input)
    table = kept.operators(trace, args.by)  # (kept on disk: the window's PyTorch view loads them)
    kernels = kept.kernels(trace)
    if args.json:
        _print(ops_json(table, kernels))
        return 0
    sys.stdout.write(ops_text(table, kernels, limit=args.limit))
    if args.kernels:
        sys.stdout.write("\n" + kernels_text(kernels, limit=args.limit))
    return 0


def cmd_modules(args: argparse.Namespace) -> int:
    """The module tree."""
    _kept(args, "modules", lambda: _modules(args))
    return 0


def _modules(args: argparse.Namespace) -> int:
    from engine.analysis.pytorch import kept_results as kept
    from engine.analysis.pytorch.text import modules_json, modules_text

    tree = kept.modules(_open(args.input))
    if args.json:
        _print(modules_json(tree))
    else:
        sys.stdout.write(modules_text(tree))
    return 0


def cmd_memory(args: argparse.Namespace) -> int:
    """Memory peaks per GPU; for a snapshot, what was alive at the peak."""
    _kept(args, "memory", lambda: _memory(args))
    return 0


def _memory(args: argparse.Namespace) -> int:
    from engine.analysis.pytorch import kept_results as kept
    from engine.analysis.pytorch.memory import alive_at_peak
    from engine.analysis.pytorch.text import memory_json, memory_text

    trace = _open(args.input)
    tl = kept.memory(trace)
    alive = None
    if trace.info.kind == "snapshot" and tl.curves:
        alive = alive_at_peak(trace.columns_, max(tl.curves, key=lambda c: c.peak_allocated))
    if args.json:
        _print(memory_json(tl, alive))
    else:
        sys.stdout.write(memory_text(tl, alive))
    return 0
