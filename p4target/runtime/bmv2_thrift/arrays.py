"""BMv2's `standard` service, extern arrays: indexed counters, meters and registers by name."""
from __future__ import annotations

from p4target import state as st
from p4target.runtime.bmv2_thrift import wire
from p4target.runtime.bmv2_thrift.api import (
    BAD_RATES_LIST,
    INVALID_INDEX,
    INVALID_NAME,
    ApiBase,
    ApiError,
    api_method,
    error_codes,
    meter_config,
    meter_rates,
)
from p4target.runtime.bmv2_thrift.wire import I64, LIST, STRUCT


class ArrayApi(ApiBase):
    """Counter, meter and register array calls."""

    @api_method(STRUCT)
    def bm_counter_read(self, cxt_id: int, counter_name: str, index: int) -> wire.Struct:
        state = self._prog().state
        with error_codes(INVALID_INDEX, InvalidArgument=INVALID_NAME):
            packets, nbytes = state.counter_read(counter_name, index)
        return {1: (I64, wire.signed64(nbytes)), 2: (I64, wire.signed64(packets))}

    @api_method()
    def bm_counter_reset_all(self, cxt_id: int, counter_name: str) -> None:
        state = self._prog().state
        with error_codes(INVALID_INDEX, InvalidArgument=INVALID_NAME), state.lock:
            state.counter(counter_name).reset()

    @api_method()
    def bm_counter_write(self, cxt_id: int, counter_name: str, index: int, value: wire.Struct) -> None:
        state = self._prog().state
        with error_codes(INVALID_INDEX, InvalidArgument=INVALID_NAME):
            state.counter(counter_name)  # an unknown name before a bad value
            state.counter_write(counter_name, index, max(value.get(2, 0), 0), max(value.get(1, 0), 0))

    def _meter(self, name: str) -> tuple[st.State, st.MeterArray]:
        state = self._prog().state
        meter = state.meters.get(name)
        if meter is None:
            raise ApiError(INVALID_NAME, f"no meter {name!r}")
        return state, meter

    @api_method()
    def bm_meter_array_set_rates(self, cxt_id: int, meter_array_name: str, rates: list) -> None:
        state, meter = self._meter(meter_array_name)
        config = meter_config(rates, BAD_RATES_LIST)
        for index in range(meter.schema.size):
            state.meter_set(meter_array_name, index, config)

    @api_method()
    def bm_meter_set_rates(self, cxt_id: int, meter_array_name: str, index: int, rates: list) -> None:
        state, _ = self._meter(meter_array_name)
        config = meter_config(rates, BAD_RATES_LIST)
        with error_codes(INVALID_INDEX):
            state.meter_set(meter_array_name, index, config)

    @api_method(LIST)
    def bm_meter_get_rates(self, cxt_id: int, meter_array_name: str, index: int) -> tuple[int, list]:
        state, _ = self._meter(meter_array_name)
        with error_codes(INVALID_INDEX):
            return meter_rates(state.meter_get(meter_array_name, index))

    def _register(self, name: str) -> tuple[st.State, st.RegisterArray]:
        state = self._prog().state
        register = state.registers.get(name)
        if register is None:
            raise ApiError(INVALID_NAME, f"no register {name!r}")
        return state, register

    @api_method(I64)
    def bm_register_read(self, cxt_id: int, register_array_name: str, idx: int) -> int:
        _, register = self._register(register_array_name)
        with error_codes(INVALID_INDEX):
            return wire.signed64(register.read(idx))

    @api_method(LIST)
    def bm_register_read_all(self, cxt_id: int, register_array_name: str) -> tuple[int, list]:
        _, register = self._register(register_array_name)
        return I64, [wire.signed64(register.read(i)) for i in range(register.schema.size)]

    def _write_registers(self, name: str, indexes: range, value: int) -> None:
        state, register = self._register(name)
        value &= (1 << register.schema.bitwidth) - 1  # BMv2 keeps the low bits of what it is given
        if not indexes or not (0 <= indexes[0] and indexes[-1] < register.schema.size):
            raise ApiError(INVALID_INDEX, f"register {name}: index out of range 0..{register.schema.size - 1}")
        with state.lock:
            for i in indexes:
                register.write(i, value)

    @api_method()
    def bm_register_write(self, cxt_id: int, register_array_name: str, index: int, value: int) -> None:
        self._write_registers(register_array_name, range(index, index + 1), value)

    @api_method()
    def bm_register_write_range(self, cxt_id: int, register_array_name: str, start_index: int, end_index: int,
                                value: int) -> None:
        self._write_registers(register_array_name, range(start_index, end_index + 1), value)

    @api_method()
    def bm_register_reset(self, cxt_id: int, register_array_name: str) -> None:
        state, register = self._register(register_array_name)
        with state.lock:
            register.reset()
