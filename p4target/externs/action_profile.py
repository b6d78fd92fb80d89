"""action_profile and action_selector: a table's implementation (members, groups, a selector's hash), lowered
with their table (lowered/from_ir/controls.py) and run by the back ends' table code; no call of their own."""
from __future__ import annotations

from p4target.extern_registry import Extern, register
from p4target.p4info import ACTION_PROFILE


@register
class ActionProfile(Extern):
    types = ("action_profile", "action_selector")
    p4info_prefix = ACTION_PROFILE  # their P4Info entries are written with the tables'
