"""CLI commands for guided optimization: findings, checklist, compare, gate, export, walkthrough.

Registered in :mod:`engine.cli` by :func:`add_parsers`; each command is a thin layer over
``engine.analysis.rules``, ``engine.analysis.compare``, ``engine.analysis.gate``,
``engine.analysis.export`` and ``engine.walkthrough``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _dump(doc: Any) -> None:
    print(json.dumps(doc, indent=1, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


def cmd_findings(args: argparse.Namespace) -> int:
    """Print the findings of one report."""
    from engine.analysis.rules import findings_for, format_findings, to_document

    found = findings_for(args.input, reference=args.pinned_from, telemetry=args.telemetry)
    if args.json:
        _dump(to_document(args.input, found))
    else:
        sys.stdout.write(format_findings(found, snippets=not args.brief))
    return 0


def add_parsers(sub: Any) -> None:
    """Add this module's subcommands to the ``kernelscope`` parser."""
    f = sub.add_parser("findings", help="what to fix, with evidence, expected gain and how to verify")
    f.add_argument("input", metavar="REPORT", help=".nsys-rep, nsys .sqlite, Kineto .json or .ncu-rep")
    f.add_argument("--json", action="store_true", help="print kernelscope.findings/1 JSON")
    f.add_argument("--pinned-from", metavar="REPORT",
                   help="nsys report from the same machine with pinned copies (the pinned ceiling)")
    f.add_argument("--telemetry", metavar="FILE", help="NVML recording made during the run")
    f.add_argument("--brief", action="store_true", help="leave out the code examples")
    f.set_defaults(func=cmd_findings)

    for extra in _EXTRA:
        extra(sub)


#: Further parser builders, appended by the modules below as they are added.
_EXTRA: list[Any] = []


def _path(p: str) -> Path:
    return Path(p).expanduser()
