"""AggNet hosts package."""
