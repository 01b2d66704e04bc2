"""CLI commands for guided optimization: findings, checklist, compare, gate, export, walkthrough.

Registered in :mod:`engine.cli` by :func:`register`; each command is a thin layer over
``engine.analysis.findings``, ``engine.analysis.compare``, ``engine.analysis.gate``,
``engine.analysis.export`` and ``engine.sessions.walkthrough``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _dump(doc: Any) -> None:
    """Strict JSON on stdout: NaN / Infinity (an empty sample's median, say) become null."""
    from engine.analysis.summary_model import strict

    print(json.dumps(strict(doc), indent=1, allow_nan=False, default=str))


def cmd_findings(args: argparse.Namespace) -> int:
    """Print the findings of one report."""
    from engine.analysis.findings import format_findings, to_document

    found, both = _findings_and_bound(args)
    if args.json:
        print(json.dumps(to_document(args.input, found, if_all_applied=both), indent=1,
                         allow_nan=False))
    else:
        sys.stdout.write(brief_findings(found) if args.brief else format_findings(found))
        both = both if found else None
        if both is not None:
            per = (f"{both.per_step_ns / 1e6:,.2f} ms per steady step, " if both.per_step_ns is not None
                   else "")
            print(f"If all applied (no time counted twice): at most {per}{both.seconds * 1e3:,.2f} ms "
                  f"over the capture — {both.formula}")
    return 0


BRIEF_TOP = 10


def brief_findings(found: list[Any], top: int = BRIEF_TOP) -> str:
    """One line per finding (severity, title, subject, expected gain, id), the first ``top``, a count."""
    from engine.analysis.findings import format_findings
    from engine.analysis.findings.overview import gain_text

    if not found:
        return format_findings(found)
    lines = []
    for i, f in enumerate(found[:top], 1):
        subject = f.subject if len(f.subject or "") <= 60 else f.subject[:57] + "..."
        about = f" [{subject}]" if subject else ""
        lines.append(f"{i:>2}. {f.severity.upper():<8} {f.title}{about}: {gain_text(f)}  ({f.id})")
    shown = f"; the first {top} are shown (all, with evidence and fixes: without --brief)" \
        if len(found) > top else ""
    lines.append(f"{len(found)} finding{'s' if len(found) != 1 else ''}{shown}.")
    return "\n".join(lines) + "\n"


def _findings_and_bound(args: argparse.Namespace) -> tuple[list[Any], Any]:
    """The findings, and the "if all applied" bound for an nsys/Kineto report (None for ncu).

    The summary the rules need is computed once and also gives the bound (summarising a
    400k-kernel report twice doubled the command's time).
    """
    from engine.analysis.findings import findings_for, is_ncu

    p = Path(args.input).expanduser()
    if is_ncu(p):
        return findings_for(p, telemetry=args.telemetry), None
    from engine.analysis.findings.model import sort_findings
    from engine.analysis.findings.overview import combined
    from engine.cli.cached import overview_of

    summary, found = overview_of(args.input, args.range, args.pinned_from)
    if args.telemetry:
        from engine.analysis.findings.telemetry import telemetry_findings
        from engine.telemetry.recording import read_recording

        found = found + telemetry_findings(read_recording(args.telemetry))
    found = sort_findings(found)
    return found, combined(summary, found)


def register(sub: Any) -> None:
    """Add this module's subcommands to the ``kernelscope`` parser."""
    f = sub.add_parser("findings", help="what to fix, with evidence, expected gain and how to verify")
    f.add_argument("input", metavar="REPORT", help=".nsys-rep, nsys .sqlite, Kineto .json or .ncu-rep")
    f.add_argument("--json", action="store_true", help="print kernelscope.findings/2 JSON")
    f.add_argument("--range", metavar="NAME", help="the step range (nsys/Kineto) instead of the steps "
                   "found from the GPU's work; 'marker:TEXT' starts a step at each GPU operation named "
                   "like TEXT")
    f.add_argument("--pinned-from", metavar="REPORT",
                   help="nsys report from the same machine with pinned copies (the pinned ceiling)")
    f.add_argument("--telemetry", metavar="FILE", help="NVML recording made during the run")
    f.add_argument("--brief", action="store_true",
                   help=f"one line per finding: the first {BRIEF_TOP} (largest win first) and a count")
    f.set_defaults(func=cmd_findings)

    for extra in _EXTRA:
        extra(sub)


def cmd_checklist(args: argparse.Namespace) -> int:
    """List checklists, or show one with its project state and the report's matching findings."""
    from engine.analysis.findings import checklists as cl

    if not args.name:
        for n in cl.list_checklists():
            c = cl.load_checklist(n)
            print(f"{n:<14} {c.title} ({len(c.items)} items)")
        return 0
    checklist = cl.load_checklist(args.name)
    if args.set:
        if not args.project:
            raise cl.ChecklistError("--set needs --project DIR: states are saved per project.")
        item, _, state = args.set.partition("=")
        entry = cl.set_state(args.project, checklist.name, item.strip(), state.strip(), args.note or "")
        print(f"kernelscope: {item.strip()} is now {entry['state']} in {cl.state_path(args.project)}",
              file=sys.stderr)
    ids: set[str] | None = None
    found = None
    if args.report:
        from engine.analysis.findings import findings_for

        found = findings_for(args.report)
        ids = {f.id for f in found}
    states = cl.load_states(args.project, checklist.name) if args.project else {}
    rows = cl.annotate(checklist, ids, states, findings=found)
    if args.json:
        _dump({"checklist": checklist.name, "title": checklist.title, "items": rows})
    else:
        sys.stdout.write(cl.format_checklist(checklist, rows))
    return 0


def _add_checklist(sub: Any) -> None:
    c = sub.add_parser("checklist", help="optimization checklists tied to findings, with per-project state")
    c.add_argument("name", nargs="?", metavar="NAME", help="roadmap, attention, memory_bound or a .toml path")
    c.add_argument("--project", metavar="DIR", help="project folder whose item states to show or change")
    c.add_argument("--report", metavar="REPORT", help="mark the items this report's findings trigger")
    c.add_argument("--set", metavar="ITEM=STATE", help="set an item to open|applied|verified|rejected")
    c.add_argument("--note", help="a note stored with --set")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_checklist)


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare run B against baseline A."""
    from engine.analysis.compare import compare_traces, format_comparison
    from engine.reports import open_report

    c = compare_traces(open_report(_path(args.a)), open_report(_path(args.b)), range_name=args.range,
                       telemetry_a=args.telemetry_a, telemetry_b=args.telemetry_b)
    if args.json:
        _dump(c.to_dict())
    else:
        sys.stdout.write(format_comparison(c))
    return 0


def _add_compare(sub: Any) -> None:
    c = sub.add_parser("compare", help="compare two nsys runs: iteration statistics, deltas, fairness")
    c.add_argument("a", metavar="A", help="baseline report")
    c.add_argument("b", metavar="B", help="new report")
    c.add_argument("--range", metavar="NVTX", help="iteration range text (default: the repeating range "
                   "with the largest total in each report)")
    c.add_argument("--telemetry-a", metavar="FILE", help="telemetry recording made during A")
    c.add_argument("--telemetry-b", metavar="FILE", help="telemetry recording made during B")
    c.add_argument("--json", action="store_true", help="print kernelscope.compare/1 JSON")
    c.set_defaults(func=cmd_compare)


def cmd_gate(args: argparse.Namespace) -> int:
    """Evaluate CI gates; exit 0 when all pass, 4 when one fails."""
    from engine.analysis.gate import EXIT_GATE_FAILED, load_rules, run_gates, to_markdown

    results = run_gates(args.input, load_rules(args.rules), args.baseline)
    md = to_markdown(args.input, results, args.baseline)
    if args.output:
        from engine.analysis.export import write_text

        write_text(_path(args.output), md)
    sys.stdout.write(md)
    return 0 if all(r.passed for r in results) else EXIT_GATE_FAILED


def _add_gate(sub: Any) -> None:
    g = sub.add_parser("gate", help="CI gates: ncu metric thresholds and no slowdown beyond noise "
                       "(exit 0 pass, 4 fail, 1 error)")
    g.add_argument("input", metavar="REPORT", help="an .ncu-rep (metric gates) or nsys report (timing gates)")
    g.add_argument("--baseline", metavar="BASE", help="baseline report for timing gates")
    g.add_argument("--rules", metavar="GATES.toml", required=True, help="[[gate]] tables (see docs)")
    g.add_argument("-o", "--output", metavar="FILE.md", help="also write the Markdown summary here")
    g.set_defaults(func=cmd_gate)


def cmd_export(args: argparse.Namespace) -> int:
    """Export a session, a comparison (--compare B) or a timeline (perfetto)."""
    from engine.analysis import export
    from engine.reports import open_report

    out = _path(args.output)
    from engine.analysis.findings import is_ncu

    if is_ncu(_path(args.input)):
        if args.format == "perfetto" or args.compare:
            raise _usage("An Nsight Compute report exports as --format md or html; compare two of them with "
                         "`kernelscope ncu-compare BEFORE AFTER`.")
        from engine.analysis.export_ncu import ncu_html, ncu_markdown
        from engine.analysis.findings import findings_for
        from engine.reports.ncu import read_ncu

        report, found = read_ncu(_path(args.input)), findings_for(args.input)
        text = ncu_markdown(report, found) if args.format == "md" else ncu_html(report, found)
        export.write_text(out, text)
        print(f"kernelscope: wrote {out}", file=sys.stderr)
        return 0
    if args.format == "perfetto":
        if args.compare:
            raise _usage("--format perfetto exports one timeline; leave out --compare.")
        from engine.analysis.export_perfetto import write_perfetto

        write_perfetto(open_report(_path(args.input)), out)
    elif args.compare:
        from engine.analysis.compare import compare_traces

        c = compare_traces(open_report(_path(args.input)), open_report(_path(args.compare)))
        text = export.comparison_markdown(c) if args.format == "md" else export.comparison_html(c)
        export.write_text(out, text)
    else:
        from engine.analysis.calls import prefetch_api_calls
        from engine.analysis.findings.overview import overview

        trace = open_report(_path(args.input))
        prefetch_api_calls(trace)  # the calls' columns read while the kernels' are (two cores), as findings
        ref = open_report(_path(args.pinned_from)) if args.pinned_from else None
        s, found = overview(trace, reference=ref)
        from engine.analysis.pytorch.events import is_pytorch

        extra = None
        if is_pytorch(trace) or trace.info.kind == "snapshot":
            from engine.analysis.pytorch.text import pytorch_markdown

            extra = pytorch_markdown(trace)
        export.write_text(out, export.session_markdown(s, found, extra) if args.format == "md"
                          else export.session_html(s, found, extra))
    print(f"kernelscope: wrote {out}", file=sys.stderr)
    return 0


def _usage(msg: str) -> Exception:
    from engine.system.errors import KernelscopeError

    return KernelscopeError(msg)


def _add_export(sub: Any) -> None:
    e = sub.add_parser("export", help="a session or comparison as Markdown / self-contained HTML, or a "
                       "timeline as Perfetto (Chrome trace-event) JSON, gzip-compressed when FILE "
                       "ends in .gz (streamed; ui.perfetto.dev opens both)")
    e.add_argument("input", metavar="REPORT")
    e.add_argument("--format", choices=["md", "html", "perfetto"], required=True)
    e.add_argument("-o", "--output", metavar="FILE", required=True)
    e.add_argument("--compare", metavar="B", help="export the comparison REPORT (baseline) vs B")
    e.add_argument("--pinned-from", metavar="REPORT", help="pinned-ceiling reference for the findings")
    e.set_defaults(func=cmd_export)


def cmd_walkthrough(args: argparse.Namespace) -> int:
    """Walkthrough steps: start, status, pick, verify, rerun, report."""
    from engine.sessions import walkthrough as wt

    step = args.step
    if step == "start":
        if not args.args:
            raise wt.WalkthroughError("Give the baseline report: `kernelscope walkthrough start BASELINE "
                                      "--project DIR`.")
        wt.start(args.project, args.args[0], checklist=args.checklist, reference=args.pinned_from,
                 range_name=args.range)
    elif step == "pick":
        if not args.args:
            raise wt.WalkthroughError("Name the checklist items you will apply (see `walkthrough status`).")
        wt.pick(args.project, list(args.args))
    elif step == "verify":
        if not args.args:
            raise wt.WalkthroughError("Give the report recorded after the change: `kernelscope walkthrough "
                                      "verify AFTER --project DIR`.")
        wt.verify(args.project, args.args[0])
    elif step == "rerun":
        from engine.sessions.spec import SessionSpec

        if not args.workload:
            raise wt.WalkthroughError("rerun needs --workload NAME (a kernels/ workload) and its "
                                      "--param k=v.")
        params = dict(p.split("=", 1) for p in args.param or [])
        spec = SessionSpec(tool="nsys", workload=args.workload, params=params,
                           out_dir=str(_path(args.project) / "sessions"))
        wt.rerun(args.project, spec)
    elif step == "report":
        doc = wt.load(args.project)
        if not args.output:
            sys.stdout.write(wt.walkthrough_markdown(doc))
            return 0
        from engine.analysis.export import write_text

        out = _path(args.output)
        write_text(out, wt.walkthrough_html(doc) if out.suffix in (".html", ".htm")
                   else wt.walkthrough_markdown(doc))
        print(f"kernelscope: wrote {out}", file=sys.stderr)
        return 0
    doc = wt.load(args.project)
    if args.json:
        _dump(doc)
    else:
        sys.stdout.write(wt.format_status(doc))
    return 0


def _add_walkthrough(sub: Any) -> None:
    w = sub.add_parser("walkthrough", help="baseline -> findings -> pick items -> re-run -> verified by "
                       "statistics (start|status|pick|verify|rerun|report)")
    w.add_argument("step", choices=["start", "status", "pick", "verify", "rerun", "report"])
    w.add_argument("args", nargs="*", metavar="ARG",
                   help="start: BASELINE report; pick: checklist ITEM ids; verify: AFTER report")
    w.add_argument("--project", metavar="DIR", default=".", help="project folder (state in DIR/.kernelscope)")
    w.add_argument("--checklist", default="roadmap", help="start: the checklist to follow (default roadmap)")
    w.add_argument("--pinned-from", metavar="REPORT", help="start: pinned-ceiling reference report")
    w.add_argument("--range", metavar="NVTX", help="start: the iteration range (default: auto)")
    w.add_argument("--workload", help="rerun: kernels/ workload to record under nsys")
    w.add_argument("--param", action="append", metavar="K=V", help="rerun: workload parameter")
    w.add_argument("-o", "--output", metavar="FILE", help="report: write .md or .html here")
    w.add_argument("--json", action="store_true", help="print the state as JSON")
    w.set_defaults(func=cmd_walkthrough)


#: Further parser builders.
_EXTRA: list[Any] = [_add_checklist, _add_compare, _add_gate, _add_export, _add_walkthrough]


def _path(p: str) -> Path:
    return Path(p).expanduser()
