"""STF parsing, expectation matching and the table commands, on a real `State`.

The schema is written by hand (as p4target.state allows) so these tests need no P4 program;
packet-level behaviour is covered by test_stf_programs.py.
"""
from types import SimpleNamespace

import pytest

from p4target import state as st
from p4target.stf import Expectation, StfError, StfRunner, parse_stf


def make_runner():
    schema = st.ProgramSchema(
        actions={
            "NoAction": st.ActionSchema("NoAction"),
            "Ing.fwd": st.ActionSchema("Ing.fwd", (("port", 9), ("mac", 48))),
            "Ing.mark": st.ActionSchema("Ing.mark", (("v", 8),)),
        },
        tables={
            "Ing.routes": st.TableSchema("Ing.routes", (st.KeyField("hdr.ipv4.dstAddr", 32, "lpm"),),
                                         ("Ing.fwd", "NoAction")),
            "Ing.acl": st.TableSchema("Ing.acl", (st.KeyField("hdr.ipv4.srcAddr", 32, "ternary"),
                                                  st.KeyField("hdr.stack[1].f", 16, "range"),
                                                  st.KeyField("hdr.ipv4.isValid()", 1, "exact")),
                                      ("Ing.mark", "NoAction")),
        },
        registers={"Ing.r": st.RegisterSchema("Ing.r", 16, 4), "Eg.r": st.RegisterSchema("Eg.r", 16, 4)},
        counters={"Ing.c": st.CounterSchema("Ing.c", 4)},
    )
    state = st.State(schema)
    return StfRunner(SimpleNamespace(state=state, process=None), "t.stf"), state


def run(runner, text):
    return runner.run(parse_stf(text, "t.stf"))


def test_parse_skips_comments_and_keeps_line_numbers():
    cmds = parse_stf("# header\n\nadd t k:1 a()  # trailing\n  WAIT\n", "t.stf")
    assert [(c.verb, c.rest, c.line) for c in cmds] == [("add", "t k:1 a()", 3), ("wait", "", 4)]


def test_unknown_command_is_a_one_line_error_with_line():
    with pytest.raises(StfError) as exc:
        parse_stf("wait\nfrobnicate 1 2\n", "t.stf")
    assert str(exc.value) == "t.stf:2: error: unknown STF command 'frobnicate'"
    assert exc.value.exit_code == 2


def test_expectation_wildcards_and_end_marker():
    loose = Expectation("0A**FF", False, 1)
    assert loose.matches(bytes.fromhex("0A12FF"))
    assert loose.matches(bytes.fromhex("0A12FF99"))  # trailing bytes not compared without $
    assert not loose.matches(bytes.fromhex("0A12FE"))
    assert not loose.matches(bytes.fromhex("0A12"))  # too short
    exact = Expectation("0A**FF", True, 1)
    assert exact.matches(bytes.fromhex("0AFFFF"))
    assert not exact.matches(bytes.fromhex("0A12FF99"))


def test_lpm_keys_from_wildcards_prefix_and_full_values():
    runner, state = make_runner()
    run(runner, "add routes hdr.ipv4.dstAddr:0x0A0001** fwd(port:2, mac:0x1)\n"
                "add Ing.routes dstAddr:0x0A000000/8 Ing.fwd(port:3,mac:2)\n"
                "add routes dstAddr:167772418 fwd(port:4, mac:3)\n")
    table = state.table("Ing.routes")
    assert table.lookup((0x0A000105,)).params == {"port": 2, "mac": 1}
    assert table.lookup((0x0A090000,)).params == {"port": 3, "mac": 2}
    assert table.lookup((0x0A000102,)).params == {"port": 4, "mac": 3}  # 167772418 = 10.0.1.2/32
    assert table.lookup((0x0B000000,)) is None


def test_ternary_range_and_valid_keys_with_priorities():
    runner, state = make_runner()
    run(runner, "add acl 10 srcAddr:0x****0001 hdr.stack$1.f:10..20 hdr.ipv4.$valid$:1 mark(v:1)\n"
                "add acl 20 srcAddr:0x12340000&&&0xFFFF0000 hdr.ipv4.valid:1 mark(v:2)\n")
    table = state.table("Ing.acl")
    assert table.lookup((0x12340001, 15, 1)).params == {"v": 2}  # both match, 20 wins
    assert table.lookup((0x56780001, 15, 1)).params == {"v": 1}
    assert table.lookup((0x56780001, 25, 1)) is None
    assert table.lookup((0x12340001, 25, 0)) is None


def test_setdefault_and_registers():
    runner, state = make_runner()
    result = run(runner, "setdefault routes fwd(port:7, mac:0xAABB)\n"
                         "register_write Ing.r 2 513\nregister_read Ing.r 2 == 513\nregister_read Ing.r 2 > 600\n")
    assert state.get_default("Ing.routes").params == {"port": 7, "mac": 0xAABB}
    assert state.register_read("Ing.r", 2) == 513
    assert result.failures == ["t.stf:4: register Ing.r[2]: expected > 600, got 513"]


@pytest.mark.parametrize("text,message", [
    ("add nosuch k:1 a()", "no table named 'nosuch'"),
    ("add routes dstAddr:1 fwd(port:1)", "missing parameter 'mac'"),
    ("add routes dstAddr:1 mark(v:1)", "no action of table Ing.routes named 'mark'"),
    ("add routes dstAddr:1 fwd(port:1, mac:1, extra:2)", "has no parameter 'extra'"),
    ("add routes dstAddr:0x1G fwd(port:1, mac:1)", "'0x1G' is not a number"),
    ("add routes dstAddr:1 fwd(port:512, mac:1)", "does not fit in 9 bits"),
    ("register_write r 0 1", "register name 'r' is ambiguous: Eg.r, Ing.r"),
    ("register_write Ing.r 9 1", "index 9 out of range"),
    ("packet 1 abc", "even number of hex digits"),
    ("expect 1 ab$cd", "expect data must be hex digits"),
    ("mc_node_associate 1 0", "no multicast node handle 0"),
    ("check_counter Ing.c(1) packets ~ 3", "unknown comparison '~'"),
])
def test_malformed_commands_name_the_line(text, message):
    runner, _ = make_runner()
    with pytest.raises(StfError) as exc:
        run(runner, "wait\n" + text + "\n")
    assert str(exc.value).startswith("t.stf:2: error: ")
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_lpm_value_mask_form_needs_a_prefix_mask():
    runner, state = make_runner()
    run(runner, "add routes dstAddr:0x0A0B0C0D&&&0xFFFF0000 fwd(port:5, mac:0)\n")
    assert state.table("Ing.routes").lookup((0x0A0BFFFF,)).params["port"] == 5
    with pytest.raises(StfError, match="mask 0xff00ff00 is not a prefix mask"):
        run(make_runner()[0], "add routes dstAddr:1&&&0xFF00FF00 fwd(port:5, mac:0)\n")
