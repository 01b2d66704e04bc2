"""Entry point: ``kernelscope-gui [REPORT ...] [--screenshot FILE.png] [--view VIEW] [--quit-after S]``.

Kept light: only argparse and PySide6 at import; the engine, pandas and pyqtgraph load when the
first report does, so the window appears fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gui.views.registry import view_keys

VIEW_CHOICES = view_keys()

SCREENSHOT_SIZE = (1600, 1000)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kernelscope-gui",
        description="Kernelscope: see where the time went in Nsight Systems, Nsight Compute and PyTorch "
        "profiler reports; run sessions and watch GPU telemetry.",
    )
    p.add_argument("reports", nargs="*", metavar="REPORT",
                   help=".nsys-rep, nsys .sqlite, .ncu-rep, ncu CSV or PyTorch profiler .json[.gz]")
    p.add_argument("--screenshot", metavar="FILE.png",
                   help="open the report, save the chosen view at 1600x1000 as PNG, and exit")
    p.add_argument("--view", choices=VIEW_CHOICES, default="summary", help="view to show first")
    p.add_argument("--scroll", type=float, metavar="FRACTION",
                   help="with --screenshot: scroll the view down by FRACTION (0-1) of its height first")
    p.add_argument("--quit-after", type=float, metavar="SECONDS",
                   help="close the window after SECONDS (a start-up check for packagers and CI)")
    return p


def _make_app(argv: list[str]) -> object:
    from PySide6.QtGui import QFont
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        app = QApplication([sys.argv[0] if sys.argv else "kernelscope-gui", *argv])
        app.setApplicationName("Kernelscope")
        app.setOrganizationName("Kernelscope")
        app.setApplicationDisplayName("Kernelscope")
        app.setStyle("Fusion")
        f = QFont(app.font())
        if f.pointSizeF() < 10:
            f.setPointSizeF(10)
        app.setFont(f)
    return app


def take_screenshot(window: object, view: str, out: Path, timeout_ms: int = 120_000,
                    scroll: float | None = None) -> str | None:
    """Wait for the window's loads and the view's work (and a summary it shows once it comes); save it.

    The picture is 1600x1000.

    Returns None on success, or the sentence to print when the report could not be opened.
    """
    from PySide6.QtCore import QEventLoop, QSize, Qt, QTimer
    from PySide6.QtWidgets import QApplication

    from gui.main_window import MainWindow

    assert isinstance(window, MainWindow)
    errors: list[str] = []
    window.sig_load_failed.connect(lambda _p, msg: errors.append(msg))
    loop = QEventLoop()
    timer = QTimer()
    timer.setSingleShot(True)
    timer.timeout.connect(loop.quit)
    timer.start(timeout_ms)
    if window.is_loading():
        window.sig_idle.connect(loop.quit)
        loop.exec()
    if errors:
        return errors[0]
    if window.is_loading():
        return "Loading the report took too long; the screenshot was not taken."
    if window.reports.current is None:
        return "No report was opened, so there is nothing to take a screenshot of."
    window.set_view(view)
    shown = window.views.get(view)
    if shown is not None and shown.is_busy():
        shown.sig_ready.connect(loop.quit)
        loop.exec()
    report = window.reports.current
    if (getattr(shown, "shows_summary_later", False) and not report.is_ncu and not report.summary_ready
            and not report.summary_error and timer.isActive()):
        window.reports.sig_summary_ready.connect(loop.quit)  # then the view adds what it shows of it
        loop.exec()
    timer.stop()
    for _ in range(3):
        QApplication.processEvents()
    if scroll is not None and shown is not None:  # scrolled down (0..1) to what a first screen hides
        from PySide6.QtWidgets import QScrollArea

        for area in shown.findChildren(QScrollArea):
            bar = area.verticalScrollBar()
            bar.setValue(round(bar.maximum() * min(max(scroll, 0.0), 1.0)))
        QApplication.processEvents()
    pix = window.grab()
    size = QSize(*SCREENSHOT_SIZE)
    if pix.size() != size:
        pix = pix.scaled(size, Qt.AspectRatioMode.IgnoreAspectRatio,
                         Qt.TransformationMode.SmoothTransformation)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not pix.save(str(out)):
        return f"Could not write the screenshot to {out}; check the folder exists and is writable."
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    if args.screenshot:
        # A screenshot needs no screen.
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from gui.xcb_check import missing_sentence, uses_xcb

    if uses_xcb(os.environ) and (problem := missing_sentence()):
        # Qt would abort (status 134) with a misleading hint; say what is missing instead.
        print(f"kernelscope-gui: {problem}", file=sys.stderr)
        return 1
    app = _make_app([])
    from PySide6.QtCore import QTimer

    from gui import settings as gsettings
    from gui.main_window import MainWindow

    settings = gsettings.make_settings()
    reports = [Path(r) for r in args.reports]
    if args.screenshot:
        window = MainWindow(settings, error_dialogs=False, restore_geometry=False)
        window.resize(*SCREENSHOT_SIZE)
        window.show()
        window.set_view(args.view)
        window.open_paths(reports or [gsettings.default_sample()])
        err = take_screenshot(window, args.view, Path(args.screenshot), scroll=args.scroll)
        window.close()
        if err:
            print(f"kernelscope-gui: {err}", file=sys.stderr)
            return 1
        print(f"kernelscope-gui: wrote {args.screenshot}", file=sys.stderr)
        return 0

    window = MainWindow(settings)
    window.set_view(args.view)
    window.show()
    if reports:
        window.open_paths(reports)
    elif not settings.value("sample_opened", False, type=bool):
        # First start: show something real instead of an empty window.
        settings.setValue("sample_opened", True)
        window.open_path(gsettings.default_sample())
    # --quit-after SECONDS; KERNELSCOPE_SMOKE_QUIT_MS is its older internal alias (milliseconds).
    quit_ms = (round(args.quit_after * 1000) if args.quit_after is not None
               else os.environ.get("KERNELSCOPE_SMOKE_QUIT_MS"))
    if quit_ms is not None and quit_ms != "":
        QTimer.singleShot(int(quit_ms), window.close)
    return int(app.exec())  # type: ignore[attr-defined]


if __name__ == "__main__":
    sys.exit(main())
