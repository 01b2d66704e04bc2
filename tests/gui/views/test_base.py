"""The views' base: every registered view is a ReportView with the lifecycle hooks, its ViewSpec
says what it needs, and links between views go through the window (Timeline -> Kernels)."""

from __future__ import annotations

import importlib

from tests.gui.conftest import open_and_wait


def test_every_view_is_a_report_view_with_the_hooks(qtbot, window):
    from gui.settings import default_sample
    from gui.views.base import ReportView, ViewHooks
    from gui.views.registry import VIEW_SPECS

    open_and_wait(qtbot, window, default_sample())
    hooks = [n for n in dir(ViewHooks) if not n.startswith("_")]
    assert set(hooks) == {"sig_ready", "sig_message", "sig_link", "is_busy", "shutdown", "show_link"}
    for spec in VIEW_SPECS:
        cls = getattr(importlib.import_module(spec.module), spec.cls)
        assert issubclass(cls, ReportView), spec.key
        assert cls.key == spec.key, spec.key
        view = window.views[spec.key]
        assert view.spec is spec
        for name in hooks:
            assert callable(getattr(view, name)) or hasattr(getattr(view, name), "connect"), (spec.key, name)
        assert isinstance(view.is_busy(), bool)
        for target in spec.links:
            assert target in window.views, (spec.key, target)


def test_specs_declare_what_views_need():
    from gui.main_window import SUMMARY_VIEWS
    from gui.views.registry import VIEW_SPECS, spec

    assert SUMMARY_VIEWS == tuple(s.key for s in VIEW_SPECS if s.needs_summary)
    assert {"summary", "findings", "info"} <= set(SUMMARY_VIEWS)
    assert spec("kernels").needs_ncu and spec("roofline").needs_ncu and not spec("timeline").needs_ncu
    assert "kernels" in spec("timeline").links
    assert not spec("run").needs_report and not spec("telemetry").needs_report


def test_a_link_outside_the_spec_is_refused_in_words(qtbot, window):
    from gui.settings import default_sample

    open_and_wait(qtbot, window, default_sample())
    window.set_view("stats")
    window.views["stats"].sig_link.emit("kernels", {"ID": 0})  # stats declares no links
    assert window.current_view() == "stats"
    assert ("warning", "The Statistics view cannot link to 'kernels'.") in window.log.entries
