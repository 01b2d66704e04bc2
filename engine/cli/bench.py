"""The ``kernelscope bench`` and ``kernelscope calibrate`` subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.system.errors import KernelscopeError


def parse_sweeps(items: list[str] | None) -> dict[str, list[str]]:
    """``["S=128,256", "dtype=fp16,bf16"]`` → ``{"S": ["128", "256"], "dtype": [...]}``.

    Raises:
        KernelscopeError: an item is not ``name=v1,v2,...``.
    """
    out: dict[str, list[str]] = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        values = [x.strip() for x in v.split(",") if x.strip()]
        if not sep or not k.strip() or not values:
            raise KernelscopeError(f"Sweep '{item}' is not of the form name=value1,value2,...")
        out[k.strip()] = values
    return out


def register(subparsers: Any) -> None:
    """Register ``bench`` and ``calibrate``.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers``.
    """
    b: argparse.ArgumentParser = subparsers.add_parser(
        "bench", help="time a kernels/ workload: CUDA events, CI-based repeats, correctness check")
    b.add_argument("workload", metavar="WORKLOAD", nargs="?",
                   help="workload name (--list shows them and their parameters)")
    b.add_argument("--list", action="store_true", help="list workloads and parameters")
    b.add_argument("--param", action="append", metavar="K=V", help="set a parameter (repeatable)")
    b.add_argument("--sweep", action="append", metavar="K=V1,V2",
                   help="measure each value (repeatable: the cartesian product)")
    b.add_argument("--out", metavar="DIR", help="write DIR/bench.json and DIR/bench.csv")
    b.add_argument("--json", action="store_true", help="print the JSON document")
    b.add_argument("--warmup", type=int, default=3, help="untimed calls first (default 3)")
    b.add_argument("--min-repeats", type=int, default=5)
    b.add_argument("--max-repeats", type=int, default=1000)
    b.add_argument("--target-ci", type=float, default=0.01, metavar="FRACTION",
                   help="stop when the 95%% CI half-width is under this fraction of the mean (default 0.01)")
    b.add_argument("--budget", type=float, default=10.0, metavar="S",
                   help="time budget per configuration in seconds (default 10)")
    b.add_argument("--flush-l2", action="store_true", help="flush the L2 cache before each timed call")
    b.add_argument("--timer", choices=["auto", "cuda", "host"], default="auto")
    b.add_argument("--no-check", action="store_true", help="skip the correctness check")
    b.add_argument("--rtol", type=float, help="correctness tolerance (default: by dtype)")
    b.add_argument("--cpu-threads", type=int, metavar="N",
                   help="torch threads for device=cpu runs (1 is steadier on a busy machine)")
    b.set_defaults(func=cmd_bench)

    c: argparse.ArgumentParser = subparsers.add_parser(
        "calibrate", help="measure this GPU's bandwidth and matmul ceilings and store them")
    c.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cuda (default) or cpu (small sizes: tests the machinery)")
    c.add_argument("--json", action="store_true", help="print the calibration as JSON")
    c.add_argument("--budget", type=float, default=3.0, metavar="S", help="time budget per measurement")
    c.add_argument("--no-save", action="store_true", help="do not store the result")
    c.set_defaults(func=cmd_calibrate)


def _list() -> str:
    from kernels.registry import list_workloads

    lines = []
    for w in list_workloads():
        lines.append(f"{w.name}: {w.description}  [needs {', '.join(w.requires)}]")
        for k, v in w.params.items():
            choices = w.choices.get(k)
            extra = f" (one of {', '.join(choices)})" if choices else ""
            lines.append(f"    {k}={v}: {w.param_help.get(k, '')}{extra}")
    return "\n".join(lines)


def _cuda_visible() -> bool:
    try:
        import torch
    except ImportError:
        return True  # the workload's own check says torch is missing
    return bool(torch.cuda.is_available())


def _check_cpu_params(w: Any, params: dict[str, str], swept: set[str]) -> None:
    """Name every parameter a run on the CPU still needs, in one sentence (not one error at a time)."""
    if "device" not in w.params or "cuda" in w.requires:
        return
    resolved = w.resolve(params)
    on_cpu = resolved["device"] == "cpu"
    if not on_cpu and _cuda_visible():
        return
    need = {k: v for k, v in w.cpu_needs(params).items() if k not in swept}
    if not need:
        return
    flags = " ".join(f"--param {k}={v}" for k, v in need.items())
    if on_cpu:
        raise KernelscopeError(f"{w.name} with device=cpu also needs {flags} "
                               f"({', '.join(f'{k}={resolved[k]}' for k in need)} needs a CUDA GPU).")
    raise KernelscopeError(f"No CUDA GPU is visible to PyTorch; run {w.name} on the CPU with {flags}, or on "
                           "a GPU machine.")


def cmd_bench(args: argparse.Namespace) -> int:
    """Run ``kernelscope bench``."""
    from engine.sessions.bench import BenchOptions, format_table, results_json, run_sweep, write_results
    from kernels.registry import get_workload, parse_param_args

    if args.list or not args.workload:
        print(_list())
        return 0 if args.list else 2
    w = get_workload(args.workload)
    params = parse_param_args(args.param)
    sweeps = parse_sweeps(args.sweep)
    w.resolve({**params, **{k: v[0] for k, v in sweeps.items()}})  # fail fast on bad names/values
    for k, vals in sweeps.items():
        for v in vals:
            w.resolve({k: v})
    _check_cpu_params(w, params, set(sweeps))
    opts = BenchOptions(warmup=args.warmup, min_repeats=args.min_repeats, max_repeats=args.max_repeats,
                        target_rel_ci=args.target_ci, budget_s=args.budget, flush_l2=args.flush_l2,
                        timer=args.timer, check=not args.no_check, rtol=args.rtol,
                        cpu_threads=args.cpu_threads)
    opts.validate()

    def progress(i: int, n: int, combo: dict[str, str]) -> None:
        if n > 1:
            print(f"kernelscope: [{i + 1}/{n}] {' '.join(f'{k}={v}' for k, v in combo.items())}",
                  file=sys.stderr, flush=True)

    results = run_sweep(args.workload, params, sweeps, opts, progress)
    if args.out:
        jp, cp = write_results(results, Path(args.out))
        print(f"kernelscope: wrote {jp} and {cp}", file=sys.stderr)
    if args.json:
        print(json.dumps(results_json(results), indent=1))
    else:
        print(format_table(results))
    bad = [r for r in results if r.check.ok is False]
    if bad:
        r = bad[0]
        which = " ".join(f"{k}={v}" for k, v in r.params.items())
        print(f"kernelscope: {len(bad)} of {len(results)} configuration(s) gave wrong results "
              f"(first: {which}: {r.check.note}).", file=sys.stderr)
        return 1
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Run ``kernelscope calibrate``."""
    from engine.sessions.bench import BenchOptions
    from engine.sessions.calibrate import calibrate, format_calibration
    from engine.system.calibration import save_calibration

    opts = BenchOptions(warmup=2, min_repeats=5, max_repeats=200, target_rel_ci=0.02, budget_s=args.budget)
    def progress(what: str) -> None:
        print(f"kernelscope: measuring {what}", file=sys.stderr, flush=True)

    cal = calibrate(args.device, opts, progress=progress)
    if not args.no_save:
        path = save_calibration(cal)
        print(f"kernelscope: saved {path}", file=sys.stderr)
    print(json.dumps(cal.to_dict(), indent=1) if args.json else format_calibration(cal))
    return 0
