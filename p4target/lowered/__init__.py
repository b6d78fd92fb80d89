"""The lowered form between front ends and engines (model.py), and p4c's BMv2 JSON read into it."""
