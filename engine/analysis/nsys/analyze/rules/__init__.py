"""One module per ``nsys analyze`` rule.

Each is registered with :func:`engine.analysis.nsys.analyze.registry.rule`; the registry finds
them by listing this package.
"""
