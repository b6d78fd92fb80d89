"""What the engines share from the days of the IR interpreter: hashes (both back ends), and the IR frame layout and
schema that native/cgen.py still uses."""
