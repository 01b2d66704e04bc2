"""Nsight Systems reports: the SQLite export's schema, its page reader and the trace built on them.

``schema`` names the tables, the NULL stand-in and the thread-id decoding; ``sqlite_trace`` opens an
export as a :class:`~engine.reports.base.Trace`; ``pages`` reads a table's columns straight from the
file's b-tree pages (``page_child`` does it in a child process); ``rep`` turns a ``.nsys-rep`` into its
SQLite export with the user's ``nsys``.
"""
