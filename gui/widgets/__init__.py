"""Widgets the views share: the read-only sortable table (:mod:`~gui.widgets.table`) over a
DataFrame model (:mod:`~gui.widgets.table_model`), pyqtgraph axes and plot styling
(:mod:`~gui.widgets.axes`), labels (:mod:`~gui.widgets.labels`), the placeholder
(:mod:`~gui.widgets.placeholder`) and the Kernels view's comparison table
(:mod:`~gui.widgets.kernels_compare`)."""
