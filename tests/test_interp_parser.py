"""Parser semantics: select kinds, stacks, lookahead, verify, reject -> parser_error, payload."""
from pathlib import Path

import pytest

from p4target import load
from p4target.frontend import load_program

DATA = Path(__file__).parent / "data" / "interp"
OK, TOO_SHORT, NO_MATCH, STACK_OOB, BAD_N = 0, 1, 2, 3, 4


@pytest.fixture(scope="module")
def pipeline():
    return load.pipeline(load_program(str(DATA / "parser.p4")), "python")


def run(pipeline, data: bytes) -> tuple[tuple[int, int, int], bytes]:
    """(err, items, peek) from the report header, and the rest of the output packet."""
    out = pipeline.process(0, data)
    assert [port for port, _ in out] == [1]  # parser errors do not drop in v1model
    res = out[0][1]
    return (res[0], res[1], res[2]), res[3:]


@pytest.mark.parametrize("data, report, rest", [
    # header stack loop: stops at a zero item
    (bytes([1, 0, 5, 6, 0, 0xEE]), (OK, 3, 0), bytes([1, 0, 5, 6, 0, 0xEE])),
    (bytes([1, 0, 0, 0xEE]), (OK, 1, 0), bytes([1, 0, 0, 0xEE])),
    # a 4th item overflows the 3-element stack
    (bytes([1, 0, 5, 6, 7, 8]), (STACK_OOB, 3, 0), bytes([1, 0, 5, 6, 7, 8])),
    # the stack runs off the end of the packet
    (bytes([1, 0, 5]), (TOO_SHORT, 1, 0), bytes([1, 0, 5])),
    # mask: 0x2X -> lookahead peeks at the next byte without consuming it
    (bytes([0x27, 0, 0x99, 0x42]), (OK, 0, 0x99), bytes([0x27, 0, 0x99, 0x42])),
    (bytes([0x27, 0]), (TOO_SHORT, 0, 0), bytes([0x27, 0])),
    # range 5..9 -> explicit reject: parser_error stays NoError, payload kept
    (bytes([7, 0, 1, 2]), (OK, 0, 0), bytes([7, 0, 1, 2])),
    # tuple keys: (0xAA, 7) accepts; (0xAA, other) goes to verify, which fails
    (bytes([0xAA, 7]), (OK, 0, 0), bytes([0xAA, 7])),
    (bytes([0xAA, 8, 3]), (BAD_N, 0, 0), bytes([0xAA, 8, 3])),
    # no case matches
    (bytes([0x40, 0, 1]), (NO_MATCH, 0, 0), bytes([0x40, 0, 1])),
    # too short for the very first header: nothing valid, the bytes are payload
    (bytes([1]), (TOO_SHORT, 0, 0), bytes([1])),
])
def test_parser_paths(pipeline, data, report, rest):
    assert run(pipeline, data) == (report, rest)
