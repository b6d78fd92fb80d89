"""The native engine: the program compiled to C and run with no Python per packet (see pipeline.py)."""
