"""Guided walkthrough: baseline -> findings -> pick checklist items -> re-run -> verified or not.

The state lives in ``<project>/.kernelscope/walkthrough.json`` (atomic writes):

1. :func:`start` records the baseline report, its findings (with their predicted gains) and its
   per-iteration durations (the repeating NVTX range).
2. :func:`pick` chooses checklist items; the predicted gain per iteration is the sum of the gains
   of the baseline findings those items address, divided by the number of iterations.
3. The user changes the code (for the kernels/ demos the fixed variant exists) and records a new
   report, or :func:`rerun` records it through the session runner.
4. :func:`verify` compares baseline and new run (medians, 95 % CIs, Mann-Whitney U, bootstrap CI of
   the change). Items become ``verified`` only when the iteration time improved significantly
   (p < 0.05 and the CI of the change excludes 0); otherwise they stay ``applied`` with a note.
   The measured gain is stored next to the predicted one.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from engine.analysis.findings.checklists import (
    ChecklistError,
    atomic_write_json,
    load_checklist,
    read_json,
    set_state,
)
from engine.analysis.findings.model import fmt_time
from engine.system.errors import KernelscopeError

SCHEMA = "kernelscope.walkthrough/1"
STATE_FILE = "walkthrough.json"


class WalkthroughError(KernelscopeError):
    """A walkthrough step cannot run (no baseline, nothing picked, no iterations ...)."""


def state_path(project: str | Path) -> Path:
    """Where a project's walkthrough lives."""
    return Path(project).expanduser() / ".kernelscope" / STATE_FILE


def load(project: str | Path) -> dict[str, Any]:
    """The walkthrough state (WalkthroughError when none was started)."""
    try:
        doc = read_json(state_path(project), SCHEMA)
    except ChecklistError as exc:
        raise WalkthroughError(str(exc)) from exc
    if "baseline" not in doc:
        raise WalkthroughError(f"No walkthrough in {project}; start one with `kernelscope walkthrough "
                               "start BASELINE --project DIR`.")
    return doc


def _save(project: str | Path, doc: dict[str, Any]) -> None:
    atomic_write_json(state_path(project), doc)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _iterations_of(report: Path, range_name: str | None) -> dict[str, Any]:
    from engine.analysis.compare import iterations
    from engine.reports import open_report

    it = iterations(open_report(report), range_name)
    if it is None:
        raise WalkthroughError(
            f"{report} has no repeating NVTX range, so there are no iterations to compare; wrap the "
            "loop body in an NVTX range (nvtxRangePush / torch.cuda.nvtx.range) and record again.")
    return {"range": it.range, "durations_ns": it.durations_ns, "warmup": it.warmup_dropped}


def _warm(its: dict[str, Any]) -> int:
    """Warm-up steps to drop: as found by structure, else the first of at least 3."""
    if "warmup" in its:
        return int(its["warmup"])
    return 1 if len(its["durations_ns"]) >= 3 else 0


def start(project: str | Path, baseline: str | Path, *, checklist: str = "roadmap",
          reference: str | Path | None = None, range_name: str | None = None) -> dict[str, Any]:
    """Record the baseline and its findings; returns the new state."""
    from engine.analysis.findings.overview import overview
    from engine.reports import open_report

    b = Path(baseline).expanduser().resolve()
    load_checklist(checklist)
    ref = open_report(Path(reference).expanduser()) if reference else None
    summary, found = overview(open_report(b), range_name=range_name, reference=ref)
    its = _iterations_of(b, range_name)
    it = summary.iterations
    doc: dict[str, Any] = {
        "schema": SCHEMA, "checklist": checklist, "started": _now(),
        "reference": str(Path(reference).expanduser().resolve()) if reference else None,
        "range_name": range_name,
        "baseline": {
            "report": str(b), "iterations": its,
            "step_ns": it.steady_median_ns if it else None,
            "gpu_busy_per_step_ns": it.gpu_busy_per_step_ns if it else None,
            "findings": [{"id": f.id, "subject": f.subject, "title": f.title, "severity": f.severity,
                          "gain_s": f.gain.seconds if f.gain else None,
                          "per_step_ns": f.gain.per_step_ns if f.gain and not f.gain.one_time else None,
                          "overlap": f.gain.overlap if f.gain else "",
                          "gain_formula": f.gain.formula if f.gain else "",
                          "gain_kind": f.gain.kind if f.gain else ""} for f in found],
        },
        "picked": None, "runs": [],
    }
    _save(project, doc)
    return doc


def candidates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Checklist items that the baseline's findings trigger, with their predicted gains."""
    cl = load_checklist(doc["checklist"])
    found = doc["baseline"]["findings"]
    n = len(doc["baseline"]["iterations"]["durations_ns"])
    out: list[dict[str, Any]] = []
    for item in cl.items:
        hits = [f for f in found if f["id"] in item.findings]
        if not hits:
            continue
        gain = sum(f["gain_s"] or 0.0 for f in hits)
        per, _ = _per_step(doc, hits, n)
        out.append({"id": item.id, "title": item.title, "findings": sorted({f["id"] for f in hits}),
                    "predicted_gain_s": gain, "predicted_per_iteration_ns": per if n else None})
    # the largest predicted saving per step first (items without one last, in the checklist's order)
    out.sort(key=lambda c: -(c["predicted_per_iteration_ns"] or 0.0))
    return out


def _per_step(doc: dict[str, Any], hits: list[dict[str, Any]], n: int) -> tuple[float, str]:
    """Predicted saving per step of the baseline findings ``hits``, and how it was computed.

    Steady-state gains per step (the findings engine's), host-side ones together at most the GPU
    idle time of a step and GPU-side ones at most its busy time, never more than the step; one-time
    costs (start-up, warm-up) are not per-step savings. Baselines recorded before per-step gains
    existed fall back to the capture's gains ÷ steps, capped at the step.
    """
    from engine.analysis.findings.gains import group_bound

    b = doc["baseline"]
    step_ns = b.get("step_ns")
    steady = [(f.get("overlap") or "", float(f["per_step_ns"])) for f in hits if f.get("per_step_ns")]
    if step_ns and "per_step_ns" in (hits[0] if hits else {}):
        value, text = group_bound(steady, float(step_ns), float(b.get("gpu_busy_per_step_ns") or 0.0))
        return value, (f"steady-state gains per step of the baseline's {len(steady)} matching findings "
                       f"(one-time costs left out): {text}")
    gain_s = sum(f["gain_s"] or 0.0 for f in hits)
    per = gain_s * 1e9 / n if n else 0.0
    durs = b["iterations"]["durations_ns"]
    cap = float(sorted(durs)[len(durs) // 2]) if durs else per
    return min(per, cap), (f"Σ expected gains of the baseline's {len(hits)} matching findings "
                           f"({gain_s * 1e3:,.2f} ms over the capture) ÷ {n} iterations, at most the step")


def pick(project: str | Path, item_ids: list[str]) -> dict[str, Any]:
    """Choose the checklist items to apply; stores the predicted gain per iteration."""
    doc = load(project)
    cl = load_checklist(doc["checklist"])
    for i in item_ids:
        cl.item(i)
    cands = {c["id"]: c for c in candidates(doc)}
    untriggered = [i for i in item_ids if i not in cands]
    # Findings counted once even when two items address the same one.
    ids = {fid for i in item_ids for fid in cl.item(i).findings}
    hits = [f for f in doc["baseline"]["findings"] if f["id"] in ids]
    gain_s = sum(f["gain_s"] or 0.0 for f in hits)
    n = len(doc["baseline"]["iterations"]["durations_ns"])
    per, formula = _per_step(doc, hits, n)
    doc["picked"] = {
        "items": item_ids, "findings": sorted({f["id"] for f in hits}), "predicted_gain_s": gain_s,
        "predicted_per_iteration_ns": per,
        "formula": formula,
        "untriggered": untriggered, "picked_at": _now(),
    }
    _save(project, doc)
    return doc


def verify(project: str | Path, after: str | Path) -> dict[str, Any]:
    """Compare the new report with the baseline and update the picked items' states."""
    from engine.analysis.compare import ALPHA, Iterations, iteration_stats
    from engine.analysis.findings import findings_for

    doc = load(project)
    picked = doc.get("picked")
    if not picked:
        raise WalkthroughError("Pick the checklist items you applied first: `kernelscope walkthrough "
                               "pick ITEM... --project DIR`.")
    a = Path(after).expanduser().resolve()
    base_it = doc["baseline"]["iterations"]
    new_it = _iterations_of(a, doc.get("range_name"))
    ia = Iterations(base_it["range"], base_it["durations_ns"], _warm(base_it))
    ib = Iterations(new_it["range"], new_it["durations_ns"], _warm(new_it))
    stats = iteration_stats(ia, ib)
    measured = stats["median_ns_a"] - stats["median_ns_b"]
    improved = bool(stats["significant"] and stats["delta_median_ci95_ns"][1] < 0)
    # One-time costs (start-up, warm-up) are not what the picked items fix per step.
    found_after = findings_for(a, reference=doc.get("reference"), range_name=doc.get("range_name"))
    after_ids = {f.id for f in found_after if not (f.gain is not None and f.gain.one_time)}
    still = sorted(set(picked["findings"]) & after_ids)
    run = {
        "report": str(a), "at": _now(), "iterations": new_it, "stats": stats,
        "measured_per_iteration_ns": measured,
        "predicted_per_iteration_ns": picked["predicted_per_iteration_ns"],
        "measured_over_predicted": (measured / picked["predicted_per_iteration_ns"]
                                    if picked["predicted_per_iteration_ns"] else None),
        "findings_still_present": still,
        "verdict": "verified" if improved else "not verified",
        "why": (f"iteration median {fmt_time(stats['median_ns_a'])} -> {fmt_time(stats['median_ns_b'])}, "
                f"p = {stats['p_value']:.4f} ({stats['test']}), 95 % CI of the change "
                f"[{fmt_time(stats['delta_median_ci95_ns'][0])}, "
                f"{fmt_time(stats['delta_median_ci95_ns'][1])}]"
                + ("" if improved else f": not a significant improvement at alpha = {ALPHA}")),
    }
    doc["runs"].append(run)
    _save(project, doc)
    record_verdict(project, doc["checklist"], picked["items"], run)
    return run


def record_verdict(project: str | Path, checklist: str, item_ids: list[str], run: dict[str, Any]) -> None:
    """Save a before/after verdict on the applied items' checklist states (CLI and GUI alike).

    ``run`` needs ``verdict``, ``why``, ``report``, ``measured_per_iteration_ns`` and
    ``predicted_per_iteration_ns`` (``findings_still_present`` is optional). Items become
    ``verified`` on a significant improvement and stay ``applied`` otherwise; the note says why.
    """
    still = run.get("findings_still_present") or []
    for item in item_ids:
        note = f"{run['verdict']}: {run['why']}"
        if still:
            note += f"; findings still present: {', '.join(still)}"
        set_state(project, checklist, item, "verified" if run["verdict"] == "verified" else "applied", note,
                  report=str(run["report"]), measured_per_iteration_ns=run["measured_per_iteration_ns"],
                  predicted_per_iteration_ns=run["predicted_per_iteration_ns"])


def compare_runs(baseline: Any, after: Any, predicted_per_iteration_ns: float | None = None,
                 range_name: str | None = None) -> dict[str, Any]:
    """Before/after statistics of two opened traces, without a project (the GUI's walkthrough).

    Returns:
        ``{"stats", "measured_per_iteration_ns", "predicted_per_iteration_ns", "verdict", "why"}``.

    Raises:
        WalkthroughError: a trace has no repeating NVTX range.

    """
    from engine.analysis.compare import ALPHA, iteration_stats, iterations

    ia, ib = iterations(baseline, range_name), iterations(after, range_name)
    if ia is None or ib is None:
        raise WalkthroughError("Both runs need a repeating NVTX range (one per iteration) to compare "
                               "iteration times.")
    stats = iteration_stats(ia, ib)
    improved = bool(stats["significant"] and stats["delta_median_ci95_ns"][1] < 0)
    return {
        "stats": stats, "measured_per_iteration_ns": stats["median_ns_a"] - stats["median_ns_b"],
        "predicted_per_iteration_ns": predicted_per_iteration_ns,
        "verdict": "verified" if improved else "not verified",
        "why": (f"iteration median {fmt_time(stats['median_ns_a'])} -> {fmt_time(stats['median_ns_b'])}, "
                f"p = {stats['p_value']:.4f}" + ("" if improved else
                                                  f": not a significant improvement at alpha = {ALPHA}")),
    }


def predicted_gain(findings: list[Any], checklist: str, item_ids: list[str], n_iterations: int, *,
                   step_ns: float | None = None, gpu_busy_per_step_ns: float | None = None
                   ) -> tuple[float, list[str]]:
    """Predicted saving per step (ns) of applying ``item_ids``, and the findings it counts.

    ``findings`` are :class:`~engine.analysis.findings.model.Finding` objects or their dicts;
    ``step_ns`` and ``gpu_busy_per_step_ns`` (the summary's steady step) bound the prediction.
    """
    cl = load_checklist(checklist)
    ids = {fid for i in item_ids for fid in cl.item(i).findings}
    hits: list[dict[str, Any]] = []
    for f in findings:
        fid = f["id"] if isinstance(f, dict) else f.id
        if fid not in ids:
            continue
        if isinstance(f, dict):
            hits.append(f)
        else:
            g = f.gain
            hits.append({"id": fid, "gain_s": g.seconds if g else None, "overlap": g.overlap if g else "",
                         "per_step_ns": g.per_step_ns if g and not g.one_time else None})
    doc: dict[str, Any] = {"baseline": {"step_ns": step_ns, "gpu_busy_per_step_ns": gpu_busy_per_step_ns,
                        "iterations": {"durations_ns": []}}}
    per, _ = _per_step(doc, hits, n_iterations)
    return per, sorted({h["id"] for h in hits})


def rerun(project: str | Path, spec: Any, *, env: dict[str, str] | None = None, store: Any = None
          ) -> dict[str, Any]:
    """Record the new run with the session runner (an nsys ``SessionSpec``) and verify it.

    Raises:
        WalkthroughError: the session failed or produced no nsys report.

    """
    from engine.sessions.runner import run_session

    if getattr(spec, "tool", None) != "nsys":
        raise WalkthroughError("A walkthrough re-run needs an nsys session (tool = nsys).")
    out = run_session(spec, env=env, store=store)
    reports = [p for p in out.reports if p.suffix == ".sqlite"] or [
        p for p in out.reports if p.suffix == ".nsys-rep"]
    if not reports:
        raise WalkthroughError(f"The re-run produced no nsys report ({out.kind.value}: {out.message}); "
                               f"see {out.session_dir / 'session.log'}.")
    return verify(project, reports[0])


def format_status(doc: dict[str, Any]) -> str:
    """Readable text of where the walkthrough stands."""
    b = doc["baseline"]
    its = b["iterations"]["durations_ns"]
    import numpy as np

    sample = its[1:] if len(its) >= 3 else its
    lines = [f"Baseline  {b['report']}",
             f"          {len(its)} iterations of {b['iterations']['range']}, median "
             f"{fmt_time(float(np.median(sample)))}"
             + (" after the warm-up iteration" if len(its) >= 3 else ""),
             "", f"Checklist {doc['checklist']}: items the baseline's findings trigger (predicted gain per "
             "iteration)"]
    for c in candidates(doc):
        per = c["predicted_per_iteration_ns"]
        lines.append(f"  {c['id']:<22} {fmt_time(per) if per else 'n/a':>10}  {c['title']}  "
                     f"<- {', '.join(c['findings'])}")
    p = doc.get("picked")
    if p:
        lines += ["", f"Picked    {', '.join(p['items'])}: predicted "
                  f"{fmt_time(p['predicted_per_iteration_ns'])} per iteration ({p['formula']})"]
        if p["untriggered"]:
            lines.append(f"          (no baseline finding for {', '.join(p['untriggered'])})")
    for r in doc.get("runs", []):
        s = r["stats"]
        ratio = r["measured_over_predicted"]
        lines += ["", f"Run       {r['report']}",
                  f"          {r['verdict'].upper()}: {r['why']}",
                  f"          measured {fmt_time(r['measured_per_iteration_ns'])} per iteration vs predicted "
                  f"{fmt_time(r['predicted_per_iteration_ns'])}"
                  + (f" ({ratio:.2f}x of the prediction)" if ratio is not None else ""),
                  f"          speedup {s['speedup']:.2f}x"]
        if r["findings_still_present"]:
            lines.append(f"          findings still present: {', '.join(r['findings_still_present'])}")
    return "\n".join(lines) + "\n"


def walkthrough_markdown(doc: dict[str, Any]) -> str:
    """The walkthrough as Markdown (for :func:`walkthrough_html` and CI notes)."""
    lines = ["# Kernelscope walkthrough", "", f"- Baseline: `{doc['baseline']['report']}`",
             f"- Checklist: {doc['checklist']}"]
    p = doc.get("picked")
    if p:
        lines.append(f"- Applied: {', '.join(p['items'])} (findings {', '.join(p['findings'])})")
        lines.append(f"- Predicted gain: {fmt_time(p['predicted_per_iteration_ns'])} per iteration "
                     f"({p['formula']})")
    for r in doc.get("runs", []):
        s = r["stats"]
        lines += ["", f"## Re-run: {Path(r['report']).name} — **{r['verdict']}**", "",
                  "| | baseline | after |", "| --- | --- | --- |",
                  f"| iterations (warm-up dropped) | {s['n_a']} ({s['warmup_dropped_a']}) | {s['n_b']} "
                  f"({s['warmup_dropped_b']}) |",
                  f"| median | {fmt_time(s['median_ns_a'])} | {fmt_time(s['median_ns_b'])} |",
                  f"| 95 % CI of the median | {fmt_time(s['median_ci95_ns_a'][0])} – "
                  f"{fmt_time(s['median_ci95_ns_a'][1])} | {fmt_time(s['median_ci95_ns_b'][0])} – "
                  f"{fmt_time(s['median_ci95_ns_b'][1])} |",
                  "", f"- {r['why']}",
                  f"- Measured gain {fmt_time(r['measured_per_iteration_ns'])} per iteration vs predicted "
                  f"{fmt_time(r['predicted_per_iteration_ns'])}; speedup {s['speedup']:.2f}x"]
        if r["findings_still_present"]:
            lines.append(f"- Findings still present: {', '.join(r['findings_still_present'])}")
    return "\n".join(lines) + "\n"


def walkthrough_html(doc: dict[str, Any]) -> str:
    """Self-contained HTML with the before/after dot plot and predicted-vs-measured bars."""
    from engine.analysis.export import html_page, svg_bars, svg_samples

    plots = []
    b = doc["baseline"]["iterations"]["durations_ns"]
    for r in doc.get("runs", []):
        plots.append(svg_samples("Iteration times before and after (bar: median)", [
            ("baseline", [d / 1e6 for d in b]),
            (Path(r["report"]).stem[:20], [d / 1e6 for d in r["iterations"]["durations_ns"]])], "ms"))
        plots.append(svg_bars("Gain per iteration", [
            ("predicted", max(r["predicted_per_iteration_ns"], 0) / 1e6),
            ("measured", max(r["measured_per_iteration_ns"], 0) / 1e6)], "ms"))
    return html_page("Kernelscope walkthrough", walkthrough_markdown(doc), plots)
