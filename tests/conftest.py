"""Fixtures every test shares.

A test marked `root` runs real Mininet networks. Whatever way it ends (pass, failure, a
subprocess killed on timeout), what AggNet networks it left behind are torn down before the
next test starts, so one failing test never breaks the next with `File exists` on s1-eth1.
"""
from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_network_outlives_a_test(request: pytest.FixtureRequest):
    yield
    if request.node.get_closest_marker("root") is not None and os.geteuid() == 0:
        from testbed.clean import clean

        clean(all_records=True)
