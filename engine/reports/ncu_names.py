"""Kernel names as Nsight Compute prints them: the "simplified" demangled name.

``ncu`` prints a kernel's demangled name through its kernel renaming (``--rename-kernels``, on by
default since 2024): names listed in an ``ncu-kernel-renames.yaml`` are replaced, and every other
demangled name is "auto-simplified to some extent" (NVIDIA's words; the algorithm is not
documented, and the ``ncu_report`` module returns the unsimplified name that the report stores).

What :func:`simplify_demangled` does was derived from the 18 PyTorch kernels of
``tests/data/ncu/torch18_full.ncu-rep`` (their stored names against ``ncu 2025.3.1 --import``'s
output) and checked against ncu output published for other libraries (FlashInfer, CUB):

1. Integer template arguments lose their cast: ``<(int)4, (bool)0>`` -> ``<4, 0>``,
   ``std::array<char *, (unsigned long)2>`` -> ``std::array<char *, 2>``.
2. Each qualifier chain (a run of ``name::`` scopes) keeps one scope only: the innermost one that
   is not an implementation namespace (``native``, ``cuda``, ``cub``). So
   ``at::native::reduce_kernel`` -> ``at::reduce_kernel``,
   ``at::native::binary_internal::MulFunctor`` -> ``binary_internal::MulFunctor``,
   ``at::native::templates::cuda::normal_kernel`` -> ``templates::normal_kernel``; published
   ncu output shows ``flashinfer::norm::RMSNormKernel`` -> ``norm::RMSNormKernel`` and
   ``at_cuda_detail::cub::DeviceScanKernel`` -> ``at_cuda_detail::DeviceScanKernel``.
   ``<unnamed>`` (an anonymous namespace) and ``Class<args>::`` end a chain and are kept:
   ``at::native::<unnamed>::f`` -> ``at::<unnamed>::f``.

The set of implementation namespaces is what the evidence shows, not NVIDIA's list: a name with
another such namespace may print differently in ncu. ``ncu --rename-kernels off`` prints the
unsimplified name, which is :func:`strip_literal_casts` of the stored one.
"""

from __future__ import annotations

import re

#: Namespaces ncu drops from a qualifier chain (seen: at::native, templates::cuda, at_cuda_detail::cub).
IMPLEMENTATION_NAMESPACES = frozenset({"native", "cuda", "cub"})

# A cast on an integer literal template argument, as EDG-style demanglers print it: (int)4, (bool)0.
_CAST_INT = re.compile(
    r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool|__int128)\)(-?\d+)"
)
# A chain of plain scope qualifiers: at::native::  (an identifier not preceded by an identifier char,
# each followed by ::). Scopes with template arguments (Foo<int>::) or <unnamed>:: end a chain.
_CHAIN = re.compile(r"(?<![\w$])((?:[A-Za-z_$][\w$]*::)+)")


def strip_literal_casts(name: str) -> str:
    """``name`` with casts on integer literals removed: ``kernel<(int)16>`` -> ``kernel<16>``.

    Args:
        name: A demangled kernel name as ``ncu_report`` returns it.

    Returns:
        The name with each ``(type)N`` literal printed as ``N``.
    """
    return _CAST_INT.sub(r"\1", name)


def _keep_one(match: re.Match[str]) -> str:
    scopes = match.group(1).split("::")[:-1]
    kept = [s for s in scopes if s not in IMPLEMENTATION_NAMESPACES]
    return f"{kept[-1]}::" if kept else ""


def simplify_demangled(name: str) -> str:
    """The demangled kernel name as ``ncu --import R --csv`` prints it (kernel renaming on).

    A pure function of the stored demangled name; see the module documentation for the rules.

    Args:
        name: A demangled kernel name as ``ncu_report``'s ``IAction.name(NameBase_DEMANGLED)``
            returns it (C names and unmangled names pass through unchanged).

    Returns:
        The simplified name.

    Examples:
        >>> simplify_demangled("void at::native::reduce_kernel<(int)512, (int)1>(T3)")
        'void at::reduce_kernel<512, 1>(T3)'
    """
    return _CHAIN.sub(_keep_one, strip_literal_casts(name))
