"""The embedded interpreter: IR -> generated Python (codegen), storage layout, hashes, schema."""
