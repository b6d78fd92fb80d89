"""BMv2's `standard` service, parser value sets: `pvs_add`, `pvs_remove`, `pvs_get`, `pvs_clear`.

BMv2 holds a value set's member as one value of the set's compressed bitwidth, its fields (the
State's values, one per select key) concatenated, the first one most significant; the wire carries
it as big-endian bytes. simple_switch_CLI under Python 3 pads the value with a leading zero byte
when that bitwidth is not a multiple of 8, so any length is taken whose number fits the bitwidth.
"""
from __future__ import annotations

from p4target import state as st
from p4target.runtime.bmv2_thrift.api import ApiBase, ApiError, api_method, error_codes, to_bytes
from p4target.runtime.bmv2_thrift.wire import LIST, STRING

INVALID_PARSE_VSET_NAME, ERROR = 1, 2  # ParseVSetOperationErrorCode


class ValueSetApi(ApiBase):
    """Parser value set calls: members as the State's tuples, on the wire as BMv2's packed values."""

    def _vset(self, name: str) -> tuple[st.State, st.ValueSetSchema]:
        state = self._prog().state
        value_set = state.value_sets.get(name)
        if value_set is None:
            raise ApiError(INVALID_PARSE_VSET_NAME, f"no parser value set {name!r}")
        return state, value_set.schema

    def _vset_member(self, schema: st.ValueSetSchema, value: bytes) -> tuple[int, ...]:
        number = int.from_bytes(value, "big") if isinstance(value, bytes) else -1
        if not 0 <= number < 1 << sum(schema.bitwidths):
            raise ApiError(ERROR, f"value set {schema.name}: the value does not fit {sum(schema.bitwidths)} bits")
        fields, shift = [], sum(schema.bitwidths)
        for width in schema.bitwidths:
            shift -= width
            fields.append(number >> shift & (1 << width) - 1)
        return tuple(fields)

    def _vset_change(self, name: str, value: bytes, add: bool) -> None:
        state, schema = self._vset(name)
        member = self._vset_member(schema, value)
        with error_codes(ERROR), state.lock:
            members = set(state.value_set_read(name))
            state.value_set_write(name, sorted(members | {member} if add else members - {member}))

    @api_method()
    def bm_parse_vset_add(self, cxt_id: int, parse_vset_name: str, value: bytes) -> None:
        self._vset_change(parse_vset_name, value, add=True)  # already there: no error, as BMv2

    @api_method()
    def bm_parse_vset_remove(self, cxt_id: int, parse_vset_name: str, value: bytes) -> None:
        self._vset_change(parse_vset_name, value, add=False)  # not there: no error, as BMv2

    @api_method(LIST)
    def bm_parse_vset_get(self, cxt_id: int, parse_vset_name: str) -> tuple[int, list[bytes]]:
        state, schema = self._vset(parse_vset_name)
        packed = []
        for member in state.value_set_read(parse_vset_name):
            number = 0
            for value, width in zip(member, schema.bitwidths):
                number = number << width | value
            packed.append(to_bytes(number, sum(schema.bitwidths)))
        return STRING, packed

    @api_method()
    def bm_parse_vset_clear(self, cxt_id: int, parse_vset_name: str) -> None:
        state, _ = self._vset(parse_vset_name)
        with error_codes(ERROR), state.lock:
            state.value_set_write(parse_vset_name, [])
