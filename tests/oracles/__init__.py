"""Reference implementations kept to check the engine (never imported by engine/ or gui/)."""
