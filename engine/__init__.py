"""Kernelscope engine: readers, analyses, sessions and telemetry. Never imports Qt."""

__version__ = "0.1.0"
