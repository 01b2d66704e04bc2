"""One module per view; each takes the :class:`gui.documents.OpenReports` model."""
