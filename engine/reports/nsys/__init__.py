"""Nsight Systems reports: the SQLite export's schema, its readers and the trace built on them.

``schema`` names the export's tables and gives the SQL of every column and filter that
``trace.columns`` reads (the column model itself, for every kind of trace, is
:mod:`engine.reports.trace_columns`); ``sqlite_trace`` opens an export as a
:class:`~engine.reports.base.Trace`, with ``column_reads`` (its ``columns``), ``export_tables`` (its
pandas tables), ``nvtx_ranges`` (NVTX ranges by name), ``summary_columns`` (the pandas-free
summaries' reads) and ``sqlite_file`` (a read-only connection); ``columns`` is the columnar cache,
``pages`` reads a table's columns straight from the file's b-tree pages (``page_exprs``: the
expressions it evaluates, ``npy_file``: the files it writes, ``page_child``: the same in a child
process); ``rep`` turns a ``.nsys-rep`` into its SQLite export with the user's ``nsys``.
"""
