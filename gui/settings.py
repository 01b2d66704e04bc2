"""Where the GUI keeps recent files and window geometry (QSettings, organisation "Kernelscope").

``KERNELSCOPE_CONFIG`` names a directory to use instead of the user's settings (tests set it), in
which case an INI file there is used.
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QSettings

ORG = "Kernelscope"
APP = "Kernelscope"
MAX_RECENT = 10


def make_settings() -> QSettings:
    config = os.environ.get("KERNELSCOPE_CONFIG")
    if config:
        Path(config).mkdir(parents=True, exist_ok=True)
        return QSettings(str(Path(config) / "kernelscope-gui.ini"), QSettings.Format.IniFormat)
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, ORG, APP)


def recent_files(settings: QSettings) -> list[str]:
    value = settings.value("recent_files", [])
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return []


def add_recent(settings: QSettings, path: Path) -> list[str]:
    p = str(Path(path).resolve())
    items = [p] + [r for r in recent_files(settings) if r != p]
    items = items[:MAX_RECENT]
    settings.setValue("recent_files", items)
    settings.sync()
    return items


def clear_recent(settings: QSettings) -> None:
    settings.setValue("recent_files", [])
    settings.sync()


def sample_reports() -> list[Path]:
    """The bundled sample reports (resources/samples), naive first."""
    from importlib.resources import files

    root = files("resources") / "samples"
    out = [Path(str(p)) for p in root.iterdir() if p.name.endswith((".sqlite", ".nsys-rep", ".json", ".gz"))]
    return sorted(out, key=lambda p: (0 if "naive" in p.name else 1, p.name))


def default_sample() -> Path:
    return sample_reports()[0]
