"""The engines' back ends: each prints the lowered form (p4target.lowered) in its language."""
