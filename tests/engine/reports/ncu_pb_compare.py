"""Compare our ``.ncu-rep`` reader (engine/reports/ncu/pb_results.py) with ``ncu_report``, result by result.

``python -m tests.engine.reports.ncu_pb_compare REPORT`` prints a JSON object: the number of
results, metrics and instances compared, and every difference found (at most 50), for every
kernel and metric: names, workload type, metric names, each metric's kind, value, instances and
correlation ids, rule results, NVTX state and section identifiers. Run in a process of its own
per report (``ncu_report`` frees nothing it decodes).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(type(a) is type(b) and a == b)


def _nvtx(state: Any) -> Any:
    if state is None:
        return None
    out = []
    for d in state.domains():
        dom = state.domain_by_id(d)
        out.append([int(d), str(dom.name()), list(map(str, dom.push_pop_ranges())),
                    list(map(str, dom.start_end_ranges()))])
    return out


def _metric(name: str, m: Any, q: Any, diffs: list[Any]) -> int:
    """Compare one metric; returns the number of instances compared."""
    if q is None:
        diffs.append([name, "missing"])
        return 0
    if m.kind() != q.kind():
        diffs.append([name, "kind", m.kind(), q.kind()])
        return 0
    if m.kind() == 0:
        return 0
    if m.has_value() != q.has_value() or (m.has_value() and not _same(m.value(), q.value())):
        diffs.append([name, "value", repr(m.value()) if m.has_value() else None,
                      repr(q.value()) if q.has_value() else None])
    n = m.num_instances()
    if n != q.num_instances() or m.has_correlation_ids() != q.has_correlation_ids():
        diffs.append([name, "instances", n, q.num_instances()])
        return 0
    if m.kind() == 2:  # string metrics: instances are read as numbers by ncu_report (0)
        got = [(m.as_uint64(i), q.as_uint64(i)) for i in range(n)]
    elif m.kind() in (5, 6):
        got = [(m.as_uint64(i), q.as_uint64(i)) for i in range(n)]
    else:
        got = [(m.as_double(i), q.as_double(i)) for i in range(n)]
    bad = [i for i, (a, b) in enumerate(got) if not _same(a, b)]
    if bad:
        diffs.append([name, "instance values", bad[:5]])
    if m.has_correlation_ids():
        wi, qi = m.correlation_ids(), q.correlation_ids()
        if [wi.as_uint64(i) for i in range(n)] != [qi.as_uint64(i) for i in range(n)]:
            diffs.append([name, "correlation ids"])
    return n


def compare(path: Path) -> dict[str, Any]:
    """Every difference between ``ncu_report`` and :func:`~engine.reports.ncu.pb_results.read_results`."""
    import ncu_report

    from engine.reports.ncu.pb_results import read_results

    ours = read_results(path)
    ctx = ncu_report.load_report(str(path))
    refs = [(r, a) for r in range(ctx.num_ranges()) for a in range(ctx.range_by_idx(r).num_actions())]
    diffs: list[Any] = []
    metrics = instances = 0
    if len(refs) != len(ours):
        diffs.append(["results", len(refs), len(ours)])
    for k, ((r, j), q) in enumerate(zip(refs, ours, strict=False)):
        a = ctx.range_by_idx(r).action_by_idx(j)
        kd: list[Any] = []
        for base in ("NameBase_FUNCTION", "NameBase_DEMANGLED", "NameBase_MANGLED"):
            if str(a.name(getattr(a, base))) != q.name(getattr(q, base)):
                kd.append([base, str(a.name(getattr(a, base))), q.name(getattr(q, base))])
        if int(a.workload_type()) != q.workload_type():
            kd.append(["workload type", int(a.workload_type()), q.workload_type()])
        names = list(map(str, a.metric_names()))
        if names != q.metric_names():
            kd.append(["metric names", sorted(set(names) ^ set(q.metric_names()))[:10]])
        for name in names:
            metrics += 1
            instances += _metric(name, a.metric_by_name(name), q.metric_by_name(name), kd)
        if a.rule_results_as_dicts() != q.rule_results_as_dicts():
            kd.append(["rules"])
        if _nvtx(a.nvtx_state()) != _nvtx(q.nvtx_state()):
            kd.append(["nvtx", _nvtx(a.nvtx_state()), _nvtx(q.nvtx_state())])
        if [str(s.identifier()) for s in a.sections()] != [s.identifier() for s in q.sections()]:
            kd.append(["sections"])
        diffs.extend([k, *d] for d in kd)
    return {"results": len(ours), "metrics": metrics, "instances": instances, "diffs": diffs[:50]}


if __name__ == "__main__":
    print(json.dumps(compare(Path(sys.argv[1])), default=repr))
