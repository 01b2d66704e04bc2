"""A child for tests/engine/system/test_child.py, run by the engine's child runner.

It reports a stage, then does what its request asks: fail with a sentence, die of SIGKILL, raise a
bug, or sleep; then reports a second stage and returns its payload as JSON. Asked to ``echo``, it
returns what it was started with instead: its arguments, whether ``site`` ran, and the bytes sent
beside the request.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any


def handle(request: dict[str, Any], progress: Callable[[str], None]) -> bytes:
    """The example's work (see the module docstring)."""
    from engine.system.child import request_data
    from engine.system.errors import KernelscopeError

    if request.get("echo"):
        said = {"argv": sys.argv[1:], "site": not sys.flags.no_site, "data": request_data(request).hex()}
        return json.dumps(said).encode()
    progress("first stage")
    if request.get("fail"):
        raise KernelscopeError("The example cannot do that.\n(it was asked to fail)")
    if request.get("die"):
        os.kill(os.getpid(), signal.SIGKILL)
    if request.get("crash"):
        raise RuntimeError("boom")
    print("a library's line on stdout", flush=True)  # not the protocol's: ignored by the parent
    time.sleep(float(request.get("sleep", 0)))
    progress("second stage")
    return json.dumps(request["payload"]).encode()


if __name__ == "__main__":
    from engine.system.child import serve

    sys.exit(serve(handle))
