"""Control-plane values as the native engine's 64-bit words, least significant first (p4target/backends/c.py
reads keys, action arguments, register cells and digest fields so)."""
from __future__ import annotations

from p4target import state as st

WORD_BITS = 64


def words(width: int) -> int:
    """Engine words of a key or action parameter of `width` bits (wider ones: one per 64-bit chunk)."""
    return max(1, -(-width // WORD_BITS))


def chunks(value: int, width: int) -> list[int]:
    """`value` as the engine's words, least significant first (p4target/backends/c.py reads them so)."""
    return [(value >> (WORD_BITS * i)) & ((1 << WORD_BITS) - 1) for i in range(words(width))]


def param_widths(actions: dict[str, st.ActionSchema]) -> dict[str, list[int]]:
    return {name: [width for _, width in a.params] for name, a in actions.items()}


def arg_words(widths: list[int], args: tuple[int, ...]) -> tuple[int, ...]:
    """An action's arguments as the engine's words (a parameter wider than 64 bits takes several)."""
    return tuple(word for arg, width in zip(args, widths) for word in chunks(arg, width))
