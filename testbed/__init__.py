"""AggNet testbed package."""
