"""AggNet controller package."""
