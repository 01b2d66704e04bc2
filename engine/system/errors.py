"""Errors meant for people: one sentence saying what happened and what to do."""

from __future__ import annotations


class KernelscopeError(Exception):
    """An error whose message is a complete sentence for the user (no traceback needed)."""


class ReportError(KernelscopeError):
    """A report file could not be read."""


class ToolMissingError(KernelscopeError):
    """An external tool (nsys, ncu, ...) is needed but was not found or cannot do the job."""


class Cancelled(Exception):
    """The work was stopped because its cancel flag was set (not an error: nothing to tell the user)."""
