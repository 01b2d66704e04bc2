"""The ``kernelscope`` command line: a thin layer over the engine.

Every subcommand module here exposes ``register(sub)`` that adds its parsers to the subparsers
object; :mod:`engine.cli.app` builds the parser and dispatches.
"""

from engine.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
