"""Decode a ``.ncu-rep`` in short-lived child processes, a slice of its kernels each, and merge the rows.

``ncu_report`` frees nothing it decodes: ~130 MB for the first kernel of a ``--set full`` report,
~10 MB for each one after; the first SASS disassembly ~90 MB and ~0.3 s CPU, each kernel module's SASS
20-200 MB more. Decoded in one process, an 18-kernel report costs ~480 MB (~850 MB with the SASS
of every kernel's hottest instructions), for as long as the process lives (the GUI's: per report
opened). Here each child (``python -m engine.reports.ncu.decode``; two at a time unless the machine
is busy, see :func:`_parallel`; started by :func:`prespawn` while the parent still reads the
report's layout) decodes at most :data:`PER_CHILD` kernels with every metric (and, for the
sections page, the SASS of its hottest instructions), sends plain rows back and exits: without
SASS no process holds more than ~300 MB, the parent stays small, and the tables come out
complete, so the next page is read from the cache without the report.

Byte-identity with the single-process reader: ``ncu_report`` works a derived metric's unit out
from the units asked before it in the same process (:func:`engine.reports.ncu.decode.settle_units`),
so a child first asks the metric lists of the kernels before its slice, in report order; children
start assuming those are the first kernel's list, and a child whose assumption was wrong (a report
whose kernels have several metric lists) is run again with the right ones. A unit the details page
took from an earlier kernel is taken from it here too. Set ``KERNELSCOPE_NCU_CHILDREN=0`` to decode
in-process.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from engine.reports.ncu.decode import NAME_PLACEHOLDER, ActionDecoder
from engine.reports.ncu.section_defs import SectionDef
from engine.system.child import Child

#: Reports with fewer kernels are decoded in-process: they fit in ~300 MB there (~130 MB + ~10 MB a
#: kernel + Python's ~50 MB), and children cost ~0.5 s more CPU (each pays the first-kernel decode).
#: ``KERNELSCOPE_NCU_SPLIT_MIN`` and ``KERNELSCOPE_NCU_PER_CHILD`` override both (tests split small
#: reports into many children that way).
SPLIT_MIN = int(os.environ.get("KERNELSCOPE_NCU_SPLIT_MIN", "13"))
#: Kernels per child: ~130 MB + ~10 MB a kernel stays under ~300 MB. SASS is not split finer: the
#: first disassembly in a process costs ~0.3 s CPU and ~90 MB, and each kernel module's SASS 10-80
#: MB (torch18_full, each kernel's SASS freed after use: 2 children of 9 kernels 1.4 s / 437 MB,
#: 4 of 5 kernels 2.0 s / 400 MB; its xmma gemm alone peaks at 327 MB in any process), so finer
#: slices cost time and still miss 300 MB.
PER_CHILD = int(os.environ.get("KERNELSCOPE_NCU_PER_CHILD", "10"))
PER_CHILD_SASS = PER_CHILD


def _parallel() -> int:
    """Children at a time: 2 unless the machine is already busy (``KERNELSCOPE_NCU_PARALLEL`` overrides).

    Two children at once hold ~2 x 280 MB together and cost a little more CPU than one after the
    other (each pays the first-kernel decode), but on two idle cores they halve the wait; on a busy
    machine (2 cores, load 4.5) one at a time was faster (2.1 s against 2.7 s for the details page
    of torch18_full) and held 407 MB in all against 678 MB. "Busy": a load average of a core more than
    there are cores (a benchmark running page after page keeps it near 1.5 on two cores by itself).
    """
    given = os.environ.get("KERNELSCOPE_NCU_PARALLEL")
    if given:
        return max(1, int(given))
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1
    return 2 if cores >= 2 and load < cores + 1 else 1


def use_children() -> bool:
    """Whether reports are decoded in child processes (``KERNELSCOPE_NCU_CHILDREN=0``: in-process)."""
    return os.environ.get("KERNELSCOPE_NCU_CHILDREN", "1") != "0"


def _chunks(ids: list[int], per: int) -> list[list[int]]:
    n = max(1, -(-len(ids) // per))
    size = -(-len(ids) // n)
    return [ids[i:i + size] for i in range(0, len(ids), size)]


#: Children started ahead of their jobs (:func:`prespawn`): (path, job number) -> child.
_WARM: dict[tuple[str, int], Child] = {}


def _start(path: Path, refs: list[tuple[int, int]]) -> Child:
    """A child that imports its modules, opens ``path`` and decodes the kernels ``refs``, then waits.

    Decoding a kernel is most of a child's work (the first one ~120 MB of ``ncu_report`` set-up),
    so it is done while the parent still reads the report's layout and builds the job. The child is
    run by the engine's child runner (:mod:`engine.system.child`; ``python -S``, with ``ncu_report``'s
    folder only); its job and its rows go as pickles beside the request and in the result file.

    Raises:
        KernelscopeError: ``ncu_report`` is not installed or the child cannot start.

    """
    return Child("engine.reports.ncu.decode", needs="ncu_report",
                 args=[str(path), *(f"{r}:{a}" for r, a in refs)],
                 what="A process decoding the report's kernels with ncu_report",
                 hint="the report is decoded in this process instead.")


def _needs(ids: list[int]) -> list[int]:
    """The kernels a child decoding ``ids`` decodes: kernel 0 first (its metric list settles units)."""
    return ids if ids[0] == 0 else [0, *ids]


def prespawn(path: Path, refs: list[tuple[int, int]], *, sources: bool) -> None:
    """Start the first children for a report's kernels ``refs`` now (they decode, then wait for their jobs).

    They decode the kernels of :func:`read_in_children`'s first jobs as the report lists them; a
    job that turns out different (kernels numbered process by process) decodes what it lacks.
    """
    from engine.system.errors import KernelscopeError

    chunks = _chunks(list(range(len(refs))), PER_CHILD_SASS if sources else PER_CHILD)
    for n, chunk in enumerate(chunks[:_parallel()]):
        try:
            _WARM[(str(path), n)] = _start(path, [refs[k] for k in _needs(chunk)])
        except KernelscopeError:  # (the job's own start says so again)
            return


def _drop_warm() -> None:
    """End the children started ahead that got no job."""
    for child in _WARM.values():
        child.close()
    _WARM.clear()


def _run(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run each job in a child (:func:`_parallel` at a time); the results in job order.

    Raises:
        KernelscopeError: a child could not start or failed (the others are ended), in one sentence.

    """
    results: list[dict[str, Any]] = []
    running: list[Child] = []
    spawned: dict[int, Child] = {}

    def spawn(i: int) -> Child:
        if i not in spawned:
            job = jobs[i]
            refs = [tuple(job["refs"][k]) for k in [*job["settle"], *job["ids"]]]
            warm = _WARM.pop((str(job["path"]), i), None)
            spawned[i] = warm if warm is not None else _start(Path(job["path"]), refs)
        return spawned[i]

    todo = list(range(len(jobs)))
    parallel = _parallel()
    try:
        while todo or running:
            while todo and len(running) < parallel:
                i = todo.pop(0)
                child = spawn(i)
                child.send({}, pickle.dumps(jobs[i], protocol=pickle.HIGHEST_PROTOCOL))
                running.append(child)
            if todo:  # the next child starts Python and its imports now, and waits for its job
                spawn(todo[0])
            results.append(pickle.loads(running.pop(0).result()))  # noqa: S301 - our own child's result
    finally:
        for child in spawned.values():
            child.close()
    return results


def read_in_children(
    p: Path, refs: list[tuple[int, int]], processes: list[tuple[str, str, str]],
    stored_sections: list[tuple[str, ...]], section_defs: dict[str, SectionDef], *, sources: bool,
) -> tuple[ActionDecoder, list[str], list[str], dict[int, Any]]:
    """Every kernel's rows and metrics (and with ``sources`` their hottest SASS), decoded in children.

    Returns (merged decoder, printed names, stored names, resolved sources).

    Raises:
        KernelscopeError: a child could not start or failed, in one sentence (the caller then
            decodes in-process).

    """
    from engine.reports.ncu.kernel_names import simplify_names

    ids = list(range(len(refs)))
    base = {"path": str(p), "refs": refs, "processes": processes, "stored_sections": stored_sections,
            "section_defs": section_defs, "tables": True, "sources": None if sources else {}}
    chunks = _chunks(ids, PER_CHILD_SASS if sources else PER_CHILD)
    jobs: list[dict[str, Any]] = [base | {"ids": c, "settle": [0] if c[0] > 0 else []} for c in chunks]
    try:
        results = _run(jobs)
    finally:
        _drop_warm()
    # The metric lists before each slice, in report order: rerun a child that assumed otherwise.
    firsts: dict[str, int] = {}
    redo: list[int] = []
    for n, (job, res) in enumerate(zip(jobs, results, strict=True)):
        if sorted(firsts.values()) != job["settle"] and job["ids"][0] > 0:
            job["settle"] = sorted(firsts.values())
            redo.append(n)
        for k, key in zip(job["ids"], res["lists"], strict=True):
            firsts.setdefault(key, k)
    if redo:
        again = _run([jobs[n] for n in redo])
        for n, res in zip(redo, again, strict=True):
            results[n] = res
    stored_names = [name for res in results for name in res["stored_names"]]
    printed = simplify_names(stored_names)  # as ncu prints them: depends on the whole report
    dec = _merge(results, section_defs, printed)
    resolved = {k: v for res in results for k, v in res["sources"].items()}
    return dec, printed, stored_names, resolved


def _merge(results: list[dict[str, Any]], section_defs: dict[str, SectionDef],
           printed: list[str]) -> ActionDecoder:
    """One decoder holding every child's rows, as if one process had decoded the kernels in order."""
    dec = ActionDecoder(section_defs)
    for res in results:
        part = res["decoder"]
        for ident in part["idents"]:
            ident[4] = printed[int(ident[0])]
        for k in part["kernels"]:
            k["Kernel Name"] = printed[k["ID"]]
        units = part["detail_units"]
        for row in part["details"]:
            row[4] = printed[int(row[0])]
            m = row[-1]
            if m and m in units:
                first = dec.detail_units.setdefault(m, units[m])
                if first != units[m] and not (row[13] == "" and row[14] == "n/a"):
                    row[13] = first  # the unit an earlier kernel gave it (the reader keeps the first)
        for m, u in units.items():
            dec.detail_units.setdefault(m, u)
        for name, label in part["labels"].items():
            dec.labels.setdefault(name, label)
        for name, unit in part["full_units"].items():
            dec.full_units.setdefault(name, unit)
        for name, unit in part["raw_units"].items():
            dec.raw_units.setdefault(name, unit)
        dec.kernels += part["kernels"]
        dec.details += part["details"]
        dec.rule_table += part["rule_table"]
        dec.source_table += part["source_table"]
        dec.all_samples += part["all_samples"]
        dec.sections.update(part["sections"])
        dec.name_sets += part["name_sets"]
        dec.partial_nums += part["partial_nums"]
        dec.idents += part["idents"]
        dec.nvtx.update(part["nvtx"])
        dec.ranges += part["ranges"]
        dec.full_rows += part["full_rows"]
    assert all(NAME_PLACEHOLDER not in r[4] for r in dec.details)
    return dec


def resolve_in_children(
    p: Path, refs: list[tuple[int, int]], wanted: dict[int, tuple[list[int], list[tuple[int, int]]]]
) -> dict[int, Any]:
    """The hottest instructions' SASS and source lines of the kernels in ``wanted``, decoded in children.

    Raises:
        KernelscopeError: a child could not start or failed, in one sentence.

    """
    ids = sorted(wanted)
    jobs = [{"path": str(p), "refs": refs, "ids": c, "settle": [], "tables": False,
             "sources": {k: wanted[k] for k in c}} for c in _chunks(ids, PER_CHILD_SASS)]
    results = _run(jobs)
    return {k: v for res in results for k, v in res["sources"].items()}
