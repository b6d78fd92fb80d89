"""Runtime state of one embedded switch (state.py: the front door), one module per kind of object."""
from p4target.state.cells import (
                                  COUNTER_TYPES,
                                  GREEN,
                                  METER_TYPES,
                                  RED,
                                  YELLOW,
                                  CounterArray,
                                  CounterSchema,
                                  DirectCounterSchema,
                                  DirectMeterSchema,
                                  MeterArray,
                                  MeterCell,
                                  MeterConfig,
                                  MeterSchema,
                                  RegisterArray,
                                  RegisterSchema,
                                  ValueSet,
                                  ValueSetSchema,
                                  check_meter_config,
                                  counter_values,
)
from p4target.state.errors import (
                                  AlreadyExists,
                                  FailedPrecondition,
                                  InvalidArgument,
                                  NotFound,
                                  OutOfRange,
                                  PermissionDenied,
                                  ResourceExhausted,
                                  StateError,
                                  check_index,
                                  check_width,
)
from p4target.state.events import Events, PortStats
from p4target.state.profiles import ActionProfile, ProfileGroup, ProfileMember
from p4target.state.replication import CloneSession, Replication
from p4target.state.schema import (
                                  MATCH_KINDS,
                                  ActionProfileSchema,
                                  ActionSchema,
                                  DefaultAction,
                                  Exact,
                                  KeyField,
                                  Lpm,
                                  Match,
                                  Optional,
                                  ProgramSchema,
                                  Range,
                                  TableEntry,
                                  TableSchema,
                                  Ternary,
                                  check_args,
)
from p4target.state.state import State
from p4target.state.tables import Table

__all__ = ["COUNTER_TYPES", "GREEN", "METER_TYPES", "RED", "YELLOW", "CounterArray", "CounterSchema", "DirectCounterSchema",
           "DirectMeterSchema", "MeterArray", "MeterCell", "MeterConfig", "MeterSchema", "RegisterArray", "RegisterSchema",
           "ValueSet", "ValueSetSchema", "check_meter_config", "counter_values",
           "AlreadyExists", "FailedPrecondition", "InvalidArgument",
           "NotFound", "OutOfRange", "PermissionDenied", "ResourceExhausted", "StateError", "check_index", "check_width",
           "Events", "PortStats", "ActionProfile", "ProfileGroup", "ProfileMember", "CloneSession", "Replication",
           "MATCH_KINDS", "ActionProfileSchema", "ActionSchema", "DefaultAction", "Exact", "KeyField", "Lpm", "Match",
           "Optional", "ProgramSchema", "Range", "TableEntry", "TableSchema", "Ternary", "check_args", "State", "Table"]
