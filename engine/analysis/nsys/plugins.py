"""What the stats and analyze registries share: entries registered by the modules of a package.

The modules are found by name and imported on the first look-up (they import the registry, so the
registry cannot import them), then every entry is listed by name.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

E = TypeVar("E")


class Plugins(Generic[E]):
    """Entries (reports, rules) by name, registered by the modules of ``package``."""

    def __init__(self, package: str, kind: str) -> None:
        self.package, self.kind = package, kind
        self._registered: dict[str, E] = {}
        self._loaded: dict[str, E] = {}
        self._lock = threading.Lock()

    def add(self, name: str, entry: E, same: Callable[[E], bool]) -> None:
        """Register ``entry``; a second, different entry of the same name is a ValueError."""
        if name in self._registered and not same(self._registered[name]):
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._registered[name] = entry

    def all(self) -> dict[str, E]:
        """Every entry, by name (the package's modules are imported on the first call)."""
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    pkg = importlib.import_module(self.package)
                    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
                        importlib.import_module(f"{pkg.__name__}.{mod}")
                    self._loaded.update({n: self._registered[n] for n in sorted(self._registered)})
        return self._loaded


class FieldView(Mapping[str, Any], Generic[E]):
    """A read-only view ``name -> one field of its entry`` (REPORTS, COLUMNS, RULES...)."""

    def __init__(self, entries: Callable[[], dict[str, E]], field_of: Callable[[E], Any]) -> None:
        self._entries, self._field = entries, field_of

    def __getitem__(self, name: str) -> Any:
        return self._field(self._entries()[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._entries())
