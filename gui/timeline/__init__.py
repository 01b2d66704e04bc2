"""The Timeline view's data model (pure numpy, no Qt) and its canvas widget."""
