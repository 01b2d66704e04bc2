"""The module view: host and GPU time per ``nn.Module``, as a tree, forward and backward apart.

Modules come from Kineto's ``with_modules`` events (``nn.Module: Block_0``) or, without them, from
``record_function`` / NVTX ranges. The forward pass's time is what runs inside a module's call; the
backward pass's is found through autograd's sequence numbers: the backward function of a forward
operator has its sequence number, so its work belongs to the module that ran that operator.

The tree sums to the step: its root is the profiler steps (``ProfilerStep#N``; the whole trace when
there are none) and every GPU operation of a step is in exactly one of forward (by module),
backward (by module), optimizer or other, so the GPU times of the root's children add up to the
root's. Host times are the main thread's: forward, the wait in ``backward()``, optimizer, other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.analysis.pytorch.events import ANNOTATION, MODULE, OP, STEP, TorchEvents

_MODULE_PREFIX = "nn.Module: "
_OPTIMIZER_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")
#: record_function ranges that PyTorch's own libraries open: never taken for the user's modules
_LIBRARY_RANGES = ("nccl:", "c10d", "gloo:", "record_param_comms", "ProfilerStep#", "enumerate(DataLoader)")


@dataclass
class ModuleNode:
    """One node: a phase (forward, backward, optimizer, other) or a module inside one."""

    label: str
    depth: int
    calls: int = 0
    host_ns: int = 0
    gpu_ns: int = 0
    children: dict[str, ModuleNode] = field(default_factory=dict)

    def child(self, label: str) -> ModuleNode:
        """The child node named ``label``, added (empty) when there is none yet."""
        if label not in self.children:
            self.children[label] = ModuleNode(label, self.depth + 1)
        return self.children[label]

    def to_json(self) -> dict[str, Any]:
        """The node and its children, recursively, as a JSON-ready dict."""
        return {"name": self.label, "calls": self.calls, "host_ns": self.host_ns, "gpu_ns": self.gpu_ns,
                "children": [c.to_json() for c in self.children.values()]}


@dataclass
class ModuleTree:
    """The tree (``root`` is the steps) and what it was built from."""

    root: ModuleNode
    steps: int
    modules_from: str  # "nn.Module events", "record_function ranges" or "none"
    notes: list[str] = field(default_factory=list)

    def walk(self) -> list[ModuleNode]:
        """Every node of the tree, depth first, the root first."""
        out: list[ModuleNode] = []

        def visit(n: ModuleNode) -> None:
            out.append(n)
            for c in n.children.values():
                visit(c)

        visit(self.root)
        return out

    def sum_sentence(self) -> str:
        """A sentence comparing the sum of the phases' GPU and host times with the root's."""
        kids = self.root.children.values()
        gpu = sum(c.gpu_ns for c in kids)
        host = sum(c.host_ns for c in kids)
        return (f"{self.root.label}: the phases' GPU times add up to {gpu / 1e6:,.3f} ms of "
                f"{self.root.gpu_ns / 1e6:,.3f} ms, their host times to {host / 1e6:,.3f} ms of "
                f"{self.root.host_ns / 1e6:,.3f} ms.")

    def to_json(self) -> dict[str, Any]:
        """The step count, the modules' source, the notes and the tree as a JSON-ready dict."""
        return {"steps": self.steps, "modules_from": self.modules_from, "notes": self.notes,
                "tree": self.root.to_json()}


def _module_label(name: str) -> str:
    return name[len(_MODULE_PREFIX):] if name.startswith(_MODULE_PREFIX) else name


def _enclosing(ev: TorchEvents, is_kind: Any) -> Any:
    """For each range, the nearest enclosing range (or itself) for which ``is_kind`` holds (-1: none)."""
    out = np.full(ev.n, -1, dtype=np.int64)
    parents = ev.parent.tolist()
    flags = is_kind.tolist()
    for i in range(ev.n):  # parents sort before children
        if flags[i]:
            out[i] = i
        elif parents[i] >= 0:
            out[i] = out[parents[i]]
    return out


def _paths(ev: TorchEvents, mods: Any, mod_of: Any) -> dict[int, tuple[str, ...]]:
    """The path (outermost module first) of every module range."""
    paths: dict[int, tuple[str, ...]] = {}
    for m in np.flatnonzero(mods).tolist():
        p = int(ev.parent[m])
        outer = int(mod_of[p]) if p >= 0 else -1
        paths[m] = paths.get(outer, ()) + (_module_label(ev.label(m)),)
    return paths


def _step_windows(ev: TorchEvents) -> list[tuple[int, int, int]]:
    steps = np.flatnonzero(ev.cat == STEP)
    return [(int(ev.start[i]), int(ev.end[i]), int(ev.thread[i])) for i in steps]


def module_tree(ev: TorchEvents, steps: Any = None) -> ModuleTree:
    """The module tree of a program (see the module docstring).

    ``steps``: the steps found from the GPU's work (:func:`engine.analysis.steps.find_steps`), used
    when the trace has no profiler steps.
    """
    mods = ev.cat == MODULE
    modules_from = "nn.Module events"
    if not mods.any():
        skip = _OPTIMIZER_PREFIXES + _LIBRARY_RANGES
        names = np.array([not t.startswith(skip) for t in ev.names], dtype=bool)
        mods = (ev.cat == ANNOTATION) & names[ev.name] if len(ev.names) else mods
        modules_from = "record_function ranges" if mods.any() else "none"
    mod_of = _enclosing(ev, mods)
    paths = _paths(ev, mods, mod_of)
    opt_names = np.array([t.startswith(_OPTIMIZER_PREFIXES) for t in ev.names], dtype=bool)
    opt_of = _enclosing(ev, opt_names[ev.name] if len(ev.names) else np.zeros(0, bool))
    back_path = _backward_paths(ev, mod_of, paths)

    windows = _step_windows(ev)
    notes = []
    if not windows and steps is not None and steps.count:
        hs = steps.host_starts if steps.host_starts is not None else steps.starts_ns
        he = steps.host_ends if steps.host_ends is not None else steps.ends_ns
        windows = [(int(a), int(b), -1) for a, b in zip(hs, he, strict=True)]
        notes.append(f"Steps: {steps.count} found by {steps.method} ({steps.range_name}); host windows.")
    if not windows:
        first = int(min(ev.start.min(initial=0), ev.gpu_start.min(initial=0)))
        last = int(max(ev.end.max(initial=0), ev.gpu_end.max(initial=0)))
        windows = [(first, last, -1)]
        notes.append("No profiler steps (ProfilerStep#N) in the trace: the root is the whole trace.")
    whole = windows[0][2] == -1 and len(windows) == 1 and not (steps is not None and steps.count)
    root = ModuleNode("whole trace" if whole else f"{len(windows)} step(s)", 0)
    for a, b, _t in windows:
        root.calls += 1
        root.host_ns += b - a
    _gpu_into(ev, root, windows, mod_of, paths, opt_of, back_path)
    _host_into(ev, root, windows, mods, paths, opt_of, back_path)
    order = ("forward", "backward", "optimizer", "other")
    root.children = {k: root.children[k] for k in order if k in root.children}
    if modules_from == "none" and "other" in root.children:
        root.children["other"].label = "forward and other (no modules recorded)"
    if modules_from == "none":
        notes.append("No module information: record with torch.profiler.profile(with_modules=True) "
                     "(or record_function ranges) to see time per nn.Module.")
    return ModuleTree(root=root, steps=len(windows), modules_from=modules_from, notes=notes)


def module_keys(ev: TorchEvents, mods: Any) -> tuple[Any, list[Any]]:
    """Per range: its innermost module call (-1: none), and for a backward range its module path."""
    mod_of = _enclosing(ev, mods)
    return mod_of, _backward_paths(ev, mod_of, _paths(ev, mods, mod_of))


def _backward_paths(ev: TorchEvents, mod_of: Any, paths: dict[int, tuple[str, ...]]) -> list[Any]:
    """For each backward range, the module path of the forward operator with its sequence number."""
    fwd: dict[int, tuple[str, ...]] = {}
    for i in np.flatnonzero((ev.cat == OP) & ~ev.backward & (ev.seq >= 0)).tolist():
        m = int(mod_of[i])
        if m >= 0:
            fwd.setdefault(int(ev.seq[i]), paths[m])
    out: list[Any] = [None] * ev.n
    parents = ev.op_parent.tolist()
    for i in np.flatnonzero(ev.backward).tolist():
        got = fwd.get(int(ev.seq[i])) if ev.seq[i] >= 0 else None
        out[i] = got if got is not None else (out[parents[i]] if parents[i] >= 0 else None)
    return out


def _window_of(windows: list[tuple[int, int, int]], t: int) -> int:
    for k, (a, b, _th) in enumerate(windows):
        if a <= t < b:
            return k
    return -1


def _gpu_into(ev: TorchEvents, root: ModuleNode, windows: list[tuple[int, int, int]], mod_of: Any,
              paths: dict[int, tuple[str, ...]], opt_of: Any, back_path: list[Any]) -> None:
    """Each GPU operation of a step into exactly one leaf: its GPU time counts on the path down to it."""
    starts = np.array([w[0] for w in windows], dtype=np.int64)
    ends = np.array([w[1] for w in windows], dtype=np.int64)
    dur = (ev.gpu_end - ev.gpu_start).tolist()
    for j, i in enumerate(ev.gpu_op.tolist()):
        t = int(ev.start[i]) if i >= 0 else int(ev.gpu_start[j])
        k = int(np.searchsorted(starts, t, side="right")) - 1
        if k < 0 or t >= ends[k]:
            continue
        labels: tuple[str, ...]
        if i >= 0 and ev.backward[i]:
            labels = ("backward", *(back_path[i] or ()))
        elif i >= 0 and mod_of[i] >= 0:
            labels = ("forward", *paths[int(mod_of[i])])
        elif i >= 0 and opt_of[i] >= 0:
            labels = ("optimizer",)
        else:
            labels = ("other",)
        root.gpu_ns += dur[j]
        node = root
        for lab in labels:
            node = node.child(lab)
            node.gpu_ns += dur[j]


def _host_into(ev: TorchEvents, root: ModuleNode, windows: list[tuple[int, int, int]], mods: Any,
               paths: dict[int, tuple[str, ...]], opt_of: Any, back_path: list[Any]) -> None:
    """Host time: modules' calls (forward), backward functions, optimizer ranges; the rest is other."""
    main = {w[2] for w in windows}
    in_step = np.zeros(ev.n, dtype=bool)
    for a, b, _t in windows:
        in_step |= (ev.start >= a) & (ev.start < b)
    dur = (ev.end - ev.start).tolist()
    top_main = {"forward": 0, "optimizer": 0}
    for m in np.flatnonzero(mods & in_step).tolist():
        node = root.child("forward")
        for lab in paths[m]:
            node = node.child(lab)
        node.calls += 1
        node.host_ns += dur[m]
        if len(paths[m]) == 1 and (int(ev.thread[m]) in main or -1 in main):
            top_main["forward"] += dur[m]
    fwd = root.children.get("forward")
    if fwd is not None:
        fwd.host_ns = top_main["forward"]
        fwd.calls = root.calls
    opt = np.flatnonzero((opt_of == np.arange(ev.n)) & in_step).tolist()
    if opt:
        node = root.child("optimizer")
        node.calls = len(opt)
        node.host_ns = sum(dur[i] for i in opt)
        top_main["optimizer"] = node.host_ns
    back_main = _backward_host(ev, root, in_step, back_path, main)
    other = root.child("other")
    other.host_ns = max(0, root.host_ns - top_main["forward"] - top_main["optimizer"] - back_main)
    other.calls = root.calls


def _backward_host(ev: TorchEvents, root: ModuleNode, in_step: Any, back_path: list[Any],
                   main: set[int]) -> int:
    """Backward functions' host time per module (the autograd thread); the main thread's wait in it."""
    tops = [i for i in np.flatnonzero(ev.backward & in_step).tolist()
            if ev.op_parent[i] < 0 or not ev.backward[ev.op_parent[i]]]
    if not tops:
        return 0
    node = root.child("backward")
    node.calls = root.calls
    dur = (ev.end - ev.start)
    for i in np.flatnonzero(ev.backward & in_step & (ev.cat == OP)).tolist():
        path = back_path[i]
        p = int(ev.op_parent[i])
        if path is None or (p >= 0 and back_path[p] == path):
            continue  # counted with the outermost range of the same module
        n = node
        for lab in path:
            n = n.child(lab)
            n.host_ns += int(dur[i])
            n.calls += 1
    wait = _main_thread_backward(ev, in_step, main)
    node.host_ns = wait if wait else int(sum(int(dur[i]) for i in tops))
    return node.host_ns


def _main_thread_backward(ev: TorchEvents, in_step: Any, main: set[int]) -> int:
    """The main thread's time in ``backward()`` (Python frames that run the autograd engine)."""
    code = [i for i, t in enumerate(ev.names) if "run_backward" in t]
    named = np.flatnonzero(np.isin(ev.name, code) & in_step)
    hit = [i for i in named.tolist() if int(ev.thread[i]) in main or -1 in main]
    return int(sum(int(ev.end[i] - ev.start[i]) for i in hit))
