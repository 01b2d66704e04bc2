"""Kernelscope's desktop GUI (PySide6 + pyqtgraph). Entry point: :func:`gui.app.main`."""

from gui._compat import protect_none_refcount

protect_none_refcount()
