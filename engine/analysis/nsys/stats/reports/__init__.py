"""One module per ``nsys stats`` report, or per family of tiny related ones.

Each is registered with :func:`engine.analysis.nsys.stats.registry.report`; the registry finds
them by listing this package.
"""
