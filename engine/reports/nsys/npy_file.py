"""A ``.npy`` file of one integer column, written by row ranges: where the page reader puts a column."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]


class NpyFile:
    """A ``.npy`` file of one column, written by row ranges (``out[lo:hi] = values``) with pwrite.

    What the reader's ``alloc`` gives to fill a cache file: writing through a writable memory map
    page-faults every page of the file in (86 ms per 84 MB column on the 2-core VM) where a pwrite
    of the same bytes takes 32 ms; threads write their batches' disjoint ranges side by side.
    :meth:`close` when done (the file is then read with ``np.load(path, mmap_mode="r")``).
    """

    def __init__(self, path: Path, dtype: type, rows: int) -> None:
        import numpy as np

        self.path, self.dtype, self.rows = Path(path), np.dtype(dtype), rows
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            with os.fdopen(os.dup(fd), "wb") as fh:
                np.lib.format.write_array_header_1_0(
                    fh, {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
                         "shape": (rows,)})
                self.offset = fh.tell()
            os.ftruncate(fd, self.offset + rows * self.dtype.itemsize)
        except BaseException:
            os.close(fd)
            raise
        self.fd: int | None = fd

    def __len__(self) -> int:
        return self.rows

    def __setitem__(self, where: slice, values: Ints) -> None:
        import numpy as np

        lo, hi, _step = where.indices(self.rows)
        v = np.ascontiguousarray(values, dtype=self.dtype)
        if len(v) != hi - lo or self.fd is None:
            raise ValueError(f"{len(v)} values for rows {lo}:{hi} of {self.path.name}")
        data = memoryview(v).cast("B")  # type: ignore[arg-type]
        at = self.offset + lo * self.dtype.itemsize
        while len(data):
            n = os.pwrite(self.fd, data, at)
            data, at = data[n:], at + n

    def close(self) -> None:
        """Close the file (idempotent; the values written stay)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __del__(self) -> None:
        self.close()
