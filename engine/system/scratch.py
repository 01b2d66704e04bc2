"""Scratch folders named after the process that made them, and the sweep of dead processes' folders.

A process killed outright (SIGKILL, the OOM killer, a benchmark ending the app) never deletes its
temporary folders. Each folder made here carries its maker's pid (``<prefix><pid>-<random>``), so
the next process to make one deletes the folders whose maker is gone:

    folder = scratch.make("ks-child-")                    # in the temporary directory
    folder = scratch.make("ks-ranks-", where="/dev/shm")  # elsewhere
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def make(prefix: str, where: str | None = None) -> Path:
    """A new folder ``<prefix><this pid>-<random>`` under ``where`` (default: the temporary directory).

    The folders of the same prefix whose process has ended are deleted first.

    Raises:
        OSError: the folder cannot be made.

    """
    sweep(prefix, where)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=where))


def sweep(prefix: str, where: str | None = None) -> int:
    """Delete the folders ``<prefix><pid>-...`` under ``where`` whose process has ended; how many.

    A folder of a live process, of another user's process, or without a pid in its name is left.
    """
    root = where or tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(root) if n.startswith(prefix)]
    except OSError:
        return 0
    gone = 0
    for name in names:
        pid = name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(Path(root) / name, ignore_errors=True)
            gone += 1
        except OSError:  # alive (another user's): not ours to delete
            continue
    return gone
