"""Telemetry errors: each message is one sentence saying what happened and what to do."""

from __future__ import annotations

from engine.system.errors import KernelscopeError


class TelemetryError(KernelscopeError):
    """Telemetry could not be sampled, recorded or replayed."""


class TelemetryUnavailable(TelemetryError):
    """NVML cannot be used here (no driver, no GPU, no permission)."""


class RecordingError(TelemetryError):
    """A telemetry recording is missing, corrupt, foreign, or cannot be written."""
