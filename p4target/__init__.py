"""AggNet p4target package."""
