"""Text tables and versioned JSON documents of the PyTorch views (``kernelscope ops/modules/memory``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.analysis.pytorch.kernels import KernelTable
    from engine.analysis.pytorch.memory import MemoryTimeline
    from engine.analysis.pytorch.modules import ModuleTree
    from engine.analysis.pytorch.operators import OpTable

OPS_SCHEMA = "kernelscope.ops/1"
MODULES_SCHEMA = "kernelscope.modules/1"
MEMORY_SCHEMA = "kernelscope.memory/1"


def ms(ns: float) -> str:
    """Nanoseconds as milliseconds with three decimals and thousands separators."""
    return f"{ns / 1e6:,.3f}"


def mib(b: float) -> str:
    """Bytes as MiB with one decimal and thousands separators."""
    return f"{b / 2**20:,.1f}"


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths,
                                                                                             strict=True)))
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _short(text: str, width: int) -> str:
    """Cut from the middle, so both the start and the distinguishing end stay visible."""
    if len(text) <= width:
        return text
    half = (width - 1) // 2
    return text[:half] + "…" + text[-(width - 1 - half):]


def ops_text(table: OpTable, kernels: KernelTable | None = None, *, limit: int = 40) -> str:
    """The operator table as text: the top rows by self GPU time."""
    head = ["Operator" if table.by == "name" else "Operator [input shapes]", "Calls", "Host total (ms)",
            "Host self (ms)", "GPU self (ms)", "GPU total (ms)", "GPU self %", "Kernels"]
    rows = [[_short(r.key, 70), str(r.calls), ms(r.host_total_ns), ms(r.host_self_ns), ms(r.gpu_self_ns),
             ms(r.gpu_total_ns), f"{100.0 * r.gpu_self_ns / table.gpu_ns:.1f}" if table.gpu_ns else "-",
             str(r.gpu_ops)] for r in table.rows[:limit]]
    out = [_table(head, rows)]
    if len(table.rows) > limit:
        out.append(f"… {len(table.rows) - limit} more rows (--limit N, or --json for all).")
    linked = 100.0 * table.linked_gpu_ns / table.gpu_ns if table.gpu_ns else 0.0
    out.append(f"GPU time: {ms(table.gpu_ns)} ms in all, {linked:.1f} % of it launched inside a recorded "
               "operator (self GPU times add up to that part).")
    if kernels is not None and kernels.kernel_ns:
        out.append(f"Tensor cores: {100.0 * kernels.tensor_share:.1f} % of kernel time ran in kernels that "
                   f"use them; {ms(kernels.cuda_core_math_ns)} ms of matrix math ran on CUDA cores.")
    out += table.notes
    return "\n".join(out) + "\n"


def ops_json(table: OpTable, kernels: KernelTable | None = None) -> dict[str, Any]:
    """The operator table (and the kernel table, when given) as a versioned JSON document."""
    doc: dict[str, Any] = {"schema": OPS_SCHEMA, "source": table.source, "by": table.by,
                           "gpu_ns": table.gpu_ns, "linked_gpu_ns": table.linked_gpu_ns,
                           "notes": table.notes, "operators": [r.to_json() for r in table.rows]}
    if kernels is not None:
        doc["kernels"] = {"kernel_ns": kernels.kernel_ns, "tensor_core_ns": kernels.tensor_ns,
                          "tensor_core_share": kernels.tensor_share,
                          "cuda_core_math_ns": kernels.cuda_core_math_ns,
                          "rows": [r.to_json() for r in kernels.rows]}
    return doc


def kernels_text(kernels: KernelTable, *, limit: int = 30) -> str:
    """The kernel table as text: the top rows by total time."""
    head = ["Kernel", "Calls", "Total (ms)", "Mean (us)", "Share %", "Tensor cores", "Operator", "Grid",
            "Block"]
    rows = [[_short(r.name, 60), str(r.calls), ms(r.total_ns), f"{r.mean_ns / 1e3:,.1f}",
             f"{100 * r.share:.1f}",
             "yes" if r.tensor_cores else ("no (CUDA cores)" if r.cuda_core_math else "no"), _short(r.op, 34),
             r.grid, r.block] for r in kernels.rows[:limit]]
    return _table(head, rows) + "\n"


def modules_text(tree: ModuleTree) -> str:
    """The module tree as an indented text table, with the sum sentence and the notes."""
    head = ["Module", "Calls", "Host (ms)", "GPU (ms)", "GPU %"]
    rows = []
    for node in tree.walk():
        share = 100.0 * node.gpu_ns / tree.root.gpu_ns if tree.root.gpu_ns else 0.0
        rows.append(["  " * node.depth + node.label, str(node.calls), ms(node.host_ns), ms(node.gpu_ns),
                     f"{share:.1f}"])
    out = [_table(head, rows)]
    out.append(tree.sum_sentence())
    out += tree.notes
    return "\n".join(out) + "\n"


def modules_json(tree: ModuleTree) -> dict[str, Any]:
    """The module tree as a versioned JSON document."""
    return {"schema": MODULES_SCHEMA, **tree.to_json()}


def memory_text(tl: MemoryTimeline, alive: list[dict[str, Any]] | None = None) -> str:
    """The memory peaks per device as text, with the blocks alive at the peak when given."""
    out = [tl.measures]
    for c in tl.curves:
        parts = [f"GPU {c.device}: {len(c.time_ns):,} events"]
        if c.allocated is not None:
            parts.append(f"peak allocated {mib(c.peak_allocated)} MiB ({c.peak_allocated:,} bytes)")
        if c.reserved is not None:
            parts.append(f"peak reserved {mib(c.peak_reserved)} MiB")
        i = c.peak_index
        if i >= 0:
            parts.append(f"peak at {c.time_ns[i] / 1e6:,.3f} ms")
            if c.allocated is not None and c.reserved is not None and c.reserved[i]:
                frag = 1.0 - c.allocated[i] / c.reserved[i]
                parts.append(f"{100 * frag:.1f} % of the reserved memory unused at the peak")
        out.append("; ".join(parts) + ".")
    if alive:
        out.append("")
        out.append("Alive at the peak (by where it was allocated):")
        rows = [[_short(a["where"], 90), str(a["blocks"]), mib(a["bytes"])] for a in alive[:20]]
        out.append(_table(["Allocated at", "Blocks", "MiB"], rows))
    out += tl.notes
    return "\n".join(out) + "\n"


def memory_json(tl: MemoryTimeline, alive: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The memory curves' summary (and the blocks alive at the peak) as a versioned JSON document."""
    doc = {"schema": MEMORY_SCHEMA, **tl.to_json()}
    if alive is not None:
        doc["alive_at_peak"] = alive
    return doc


def pytorch_markdown(trace: Any, *, limit: int = 15) -> list[str]:
    """The PyTorch section of an exported report: top operators, phases and modules, memory peaks."""
    from engine.analysis.pytorch.events import is_pytorch, torch_events
    from engine.analysis.pytorch.kernels import kernel_table
    from engine.analysis.pytorch.memory import memory_timeline
    from engine.analysis.pytorch.modules import module_tree
    from engine.analysis.pytorch.operators import operator_table
    from engine.analysis.steps import find_steps

    out = ["## PyTorch", ""]
    if is_pytorch(trace):
        ev = torch_events(trace)
        table = operator_table(ev)
        kt = kernel_table(ev)
        out += [f"Operators by self GPU time ({len(table.rows):,} in all; tensor cores: "
                f"{100 * kt.tensor_share:.1f} % of kernel time):", "",
                "| Operator | Calls | Host self (ms) | GPU self (ms) | GPU total (ms) |",
                "|---|---:|---:|---:|---:|"]
        out += [f"| `{r.key}` | {r.calls:,} | {ms(r.host_self_ns)} | {ms(r.gpu_self_ns)} | "
                f"{ms(r.gpu_total_ns)} |"
                for r in table.rows[:limit]]
        tree = module_tree(ev, find_steps(trace))
        out += ["", f"Phases of {tree.root.label} ({tree.sum_sentence()}):", "",
                "| Phase / module | Host (ms) | GPU (ms) |", "|---|---:|---:|"]
        for phase in tree.root.children.values():
            out.append(f"| {phase.label} | {ms(phase.host_ns)} | {ms(phase.gpu_ns)} |")
            out += [f"| &nbsp;&nbsp;{m.label} | {ms(m.host_ns)} | {ms(m.gpu_ns)} |"
                    for m in phase.children.values()]
    tl = memory_timeline(trace)
    out += ["", tl.measures, ""]
    for c in tl.curves:
        peak = c.peak_allocated if c.allocated is not None else c.peak_reserved
        what = "allocated" if c.allocated is not None else "reserved"
        out.append(f"- GPU {c.device}: peak {what} {mib(peak)} MiB ({peak:,} bytes), peak reserved "
                   f"{mib(c.peak_reserved)} MiB")
    out += [f"- {n}" for n in tl.notes]
    return out + [""]
