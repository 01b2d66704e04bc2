"""Kernel names as Nsight Compute prints them: the "simplified" demangled name.

``ncu`` prints a kernel's demangled name through its kernel renaming (``--rename-kernels``, on by
default since 2024): names listed in an ``ncu-kernel-renames.yaml`` are replaced, and every other
demangled name is "auto-simplified to some extent" (NVIDIA's words; the algorithm is not
documented, and the ``ncu_report`` module returns the unsimplified name that the report stores).
``ncu --rename-kernels off`` prints the stored name verbatim, casts included.

The simplification is not a function of one name: the same stored name
``void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<...>`` prints as
``void at::<unnamed>::distribution_...`` in one report and as ``void native::<unnamed>::...`` in
another. :func:`simplify_names` therefore works on all the names of a report. Its rule was inferred
from recordings printed by ncu 2025.3.1, every stored name against ncu's printed one: all 59
kernels of a CUB / thrust / ATen / topk / histogram report (``tests/data/ncu/names59_pairs.json``),
the 18 kernels of ``tests/data/ncu/torch18_full``, the public RTX 4090 report ``torchLinear``
(``../shared/fixtures/ncu_public.tar.xz``) and the known kernels of the earlier ``names40`` run,
then checked on every report of the H100 flag matrix (``tests/data/ncu/matrix``: one-, two- and
three-kernel reports of templates in nested and anonymous namespaces) and of the public set: 67
reports, every name as ncu printed it. It is an inference, not NVIDIA's algorithm: a report with
other namespaces may print differently.

1. A cast on a non-negative integer literal is dropped, whatever the type: ``<(int)4, (bool)0>``
   -> ``<4, 0>``, ``(unsigned long)2`` -> ``2``, ``(at_cuda_detail::cub::SortOrder)0`` -> ``0``.
   A cast on a negative literal is kept: ``(int)-1`` prints as ``(int)-1``.
2. Each qualifier chain of two or more plain scopes (``a::b::c::``, ending at an identifier,
   ``<unnamed>`` or ``[lambda``) keeps exactly one of its scopes; one-scope chains (``at::``,
   ``std::``, ``c10::``) are kept as they are. Which scope is kept depends on the report: for each
   scope name, count the distinct kernel names of the report that hold it in any chain (one-scope
   chains too: a cuDNN training loop's ``cudnn::bn_fw_tr_1C11_singleread`` makes ``cudnn`` commoner
   than ``engines_precompiled``, and ncu prints ``cudnn::engines_precompiled::nchwToNhwcKernel`` as
   ``engines_precompiled::nchwToNhwcKernel``; counting multi-scope chains only made it a tie);
   the chain keeps its scope with the smallest count, the outermost one on a tie, and never
   ``std`` while another scope is there. So the rarer, more specific scope survives and the ones
   spread over many kernels (``cub``, ``detail``, ``at``) go:

   - ``at_cuda_detail::cub::detail::radix_sort::X`` -> ``radix_sort::X``;
     ``at_cuda_detail::cub::NullType`` and ``at_cuda_detail::cub::detail::vsmem_t`` ->
     ``at_cuda_detail::`` (``at_cuda_detail`` heads 8 chains, ``cub`` and ``detail`` are in 9);
   - ``at::cuda::cub::detail::OpaqueType`` -> ``cuda::OpaqueType``;
     ``cuda::std::__4::equal_to`` -> ``__4::equal_to``;
     ``thrust::THRUST_300001_SM_..._NS::use_default`` -> ``thrust::use_default`` (a tie, the outer);
   - ``at::native::`` -> ``at::`` where ``at`` and ``native`` tie (torch18: every multi-scope
     ``at`` chain goes through ``native``), ``native::`` where ``at`` also heads ``at::cuda::``
     chains (names59).

   In a report of few kernels every scope of a kernel ties, and the outermost stays: the two-kernel
   public report ``torchLinear`` prints ``at::native::templates::cuda::uniform_kernel`` as
   ``at::uniform_kernel`` where the 59-kernel names59 prints ``templates::``.

3. A scope that every distinct kernel name of the report holds tells the kernels apart from
   nothing, and ncu drops it from every chain, one-scope chains too (the matrix's ``cpp_skip``:
   its three names are all in ``ks::detail::``, and ``ks::detail::binary_kernel<..., ks::Shape>``
   prints as ``binary_kernel<..., Shape>``). A report of one kernel name (however many launches)
   therefore loses all its scopes, ``std::`` too: ``outer::mid::inner::deep_reduce`` prints as
   ``deep_reduce`` (``cpp_one_reduce``). Where a whole chain goes right before ``<unnamed>``, ncu loses
   that name's ``<`` with it: ``void ks::detail::<unnamed>::scale_kernel<...>`` prints as
   ``void unnamed>::scale_kernel<...>``, a quirk of ncu 2025.3.1 reproduced as it is.

   Earlier rules: counting distinct qualified identifiers got 16 of names59 wrong; counting
   distinct chains got names59 and torch18 right but torchLinear wrong (``templates`` is in one
   chain there, ``at`` in two). Counting kernel names fits all four recordings (names59, torch18,
   torchLinear, the 29 known names of names40 except the two whose counts depend on its 11 unknown
   names); without rule 3 the matrix's ``cpp_skip`` and ``cpp_from_start_off`` printed wrong.

:func:`simplify_demangled` is the earlier rule for one name without its report (drop the casts,
negative ones too, and keep each chain's innermost scope that is not ``native``, ``cuda`` or
``cub``); it agrees with ncu on torch18 but not on CUB-heavy reports.
"""

from __future__ import annotations

import re
from collections import defaultdict

#: Namespaces the single-name rule (:func:`simplify_demangled`) drops from a qualifier chain.
IMPLEMENTATION_NAMESPACES = frozenset({"native", "cuda", "cub"})

#: Scopes :func:`simplify_names` keeps only when a chain has nothing else (``cuda::std::__4``).
NEVER_KEPT = frozenset({"std"})

# A cast on a non-negative integer literal: (int)4, (bool)0, (unsigned long)2, (ns::Enum)0. ncu
# 2025.3.1 keeps the cast on a negative one: (int)-1 (names59 kernels 42 and 49).
_CAST = re.compile(r"\((?:[A-Za-z_][\w:]*(?: [A-Za-z_]\w*)*)\)(\d+)")
# The single-name rule's cast, negative literals included (its behaviour before names59).
_CAST_SIGNED = re.compile(r"\((?:[A-Za-z_][\w:]*(?: [A-Za-z_]\w*)*)\)(-?\d+)")
# A chain of plain scope qualifiers: at::native::  (an identifier not preceded by an identifier char,
# each followed by ::). Scopes with template arguments (Foo<int>::) or <unnamed>:: end a chain.
_CHAIN = re.compile(r"(?<![\w$])((?:[A-Za-z_$][\w$]*::)+)")
# A chain and, when ``<unnamed>`` follows it, that name's "<" (ncu loses it with the whole chain).
_CHAIN_UNNAMED = re.compile(r"(?<![\w$])((?:[A-Za-z_$][\w$]*::)+)(<(?=unnamed>))?")


def strip_literal_casts(name: str) -> str:
    """``name`` with casts on non-negative integer literals removed, as ncu prints it.

    Args:
        name: A demangled kernel name as ``ncu_report`` returns it.

    Returns:
        The name with each ``(type)N`` literal printed as ``N`` (``type`` may be an enum,
        ``(ns::Order)0`` -> ``0``); a negative literal keeps its cast (``(int)-1``).

    Examples:
        >>> strip_literal_casts("k<(int)16, (int)-1, (bool)0>")
        'k<16, (int)-1, 0>'
    """
    return _CAST.sub(r"\1", name)


def _keep_one(match: re.Match[str]) -> str:
    scopes = match.group(1).split("::")[:-1]
    kept = [s for s in scopes if s not in IMPLEMENTATION_NAMESPACES]
    return f"{kept[-1]}::" if kept else ""


def simplify_demangled(name: str) -> str:
    """One demangled name simplified without its report (the single-name approximation).

    ncu's simplification depends on every name in the report; use :func:`simplify_names` when the
    report's names are at hand. This rule drops literal casts (negative ones too, unlike ncu) and
    keeps each qualifier chain's innermost scope that is not an implementation namespace
    (``native``, ``cuda``, ``cub``).

    Args:
        name: A demangled kernel name as ``ncu_report``'s ``IAction.name(NameBase_DEMANGLED)``
            returns it (C names and unmangled names pass through unchanged).

    Returns:
        The simplified name.

    Examples:
        >>> simplify_demangled("void at::native::reduce_kernel<(int)512, (int)1>(T3)")
        'void at::reduce_kernel<512, 1>(T3)'
    """
    return _CHAIN.sub(_keep_one, _CAST_SIGNED.sub(r"\1", name))


def scope_counts(names: list[str]) -> dict[str, int]:
    """For each scope name, how many distinct kernel names of the report hold it in a chain.

    Args:
        names: Demangled names with their literal casts already dropped.

    Returns:
        Scope name -> count. A chain is a run of plain scopes (``at::``, ``at::native::``,
        ``at_cuda_detail::cub::detail::radix_sort::``); each distinct kernel name counts once for
        each scope its chains hold, however often the kernel was launched and however many of its
        chains hold the scope. Only chains of two or more scopes are shortened, but one-scope
        chains count too (the H100 cuDNN training loop recording ``train40_threads`` needs them).

    Examples:
        >>> scope_counts(["a::b::f(a::b::T, a::c::U)", "a::b::g()"])
        {'a': 2, 'b': 2, 'c': 1}
    """
    counts: dict[str, int] = defaultdict(int)
    for name in dict.fromkeys(names):
        scopes: dict[str, None] = {}
        for m in _CHAIN.finditer(name):
            scopes.update(dict.fromkeys(m.group(1).split("::")[:-1]))
        for scope in scopes:
            counts[scope] += 1
    return dict(counts)


def simplify_names(stored_names: list[str]) -> list[str]:
    """All the demangled kernel names of one report as ``ncu --import R`` prints them.

    Args:
        stored_names: Every kernel's demangled name as the report stores it
            (``IAction.name(NameBase_DEMANGLED)``), in any order; the whole report, since the
            result for one name depends on the others.

    Returns:
        The printed names, in the order given.

    Examples:
        >>> simplify_names(["void at::native::<unnamed>::k<(int)4>(int)", "void at::f()"])
        ['void native::<unnamed>::k<4>(int)', 'void f()']
        >>> simplify_names(["void at::native::<unnamed>::k<(int)4>(at::cuda::detail::IntDivider<int>)",
        ...                 "void at::cuda::f()", "g()"])
        ['void native::<unnamed>::k<4>(detail::IntDivider<int>)', 'void at::f()', 'g()']
        >>> simplify_names(["void ks::detail::<unnamed>::k(ks::Shape)", "void ks::detail::f()"])
        ['void unnamed>::k(Shape)', 'void f()']
    """
    plain = [strip_literal_casts(n) for n in stored_names]
    counts = scope_counts(plain)
    everywhere = len(dict.fromkeys(plain))  # a scope in this many distinct names is in all of them

    def shorten(match: re.Match[str]) -> str:
        scopes = match.group(1).split("::")[:-1]
        left = [s for s in scopes if counts.get(s, 0) < everywhere]
        if not left:  # every scope of the chain is in every name: ncu drops them all, and "<" of <unnamed>
            return ""
        if len(scopes) == 1:
            return match.group(0)
        candidates = [s for s in left if s not in NEVER_KEPT] or left
        kept = min(candidates, key=lambda s: counts.get(s, 0))  # min(): the first on a tie
        return kept + "::" + (match.group(2) or "")

    return [_CHAIN_UNNAMED.sub(shorten, n) for n in plain]
