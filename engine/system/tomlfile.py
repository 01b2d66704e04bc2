"""Read a user's TOML file (gates, checklists) with one sentence for each way it can be wrong."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from engine.system.errors import KernelscopeError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def read_toml(path: Path, label: str, hint: str, error: type[KernelscopeError]) -> dict[str, Any]:
    """Parse ``path`` as TOML.

    Args:
        path: The file.
        label: How sentences name it, e.g. ``"The gates file"``.
        hint: What to give instead when it is not text, e.g. ``"give a .toml checklist"``.
        error: The exception class to raise.

    Raises:
        KernelscopeError: (as ``error``) unreadable, not UTF-8 text, or not valid TOML.
    """
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise error(f"{label} {path} cannot be read ({exc.strerror}).") from exc
    except UnicodeDecodeError as exc:
        raise error(f"{label} {path} is not a text file (not UTF-8); {hint}.") from exc
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{label} {path} is not valid TOML ({exc}); fix it there.") from exc
