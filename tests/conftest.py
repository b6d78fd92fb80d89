"""Fixtures every test shares.

A test marked `root` runs real Mininet networks. Whatever way it ends (pass, failure, a
subprocess killed on timeout), what AggNet networks it left behind are torn down before the
next test starts, so one failing test never breaks the next with `File exists` on s1-eth1.
Networks this pytest process owns may be a module's shared fixture, so those go only when
the module is done.
"""
from __future__ import annotations

import os

import pytest

from p4target import externs
from testbed.cli import no_grpc_fork_handlers

no_grpc_fork_handlers()  # tests run networks in this process, which also holds gRPC channels
externs.load()  # the tests are a composition root of the target: they load programs themselves


def _root(node: pytest.Item | pytest.Module) -> bool:
    return os.geteuid() == 0 and any(True for _ in node.iter_markers("root"))


@pytest.fixture(autouse=True)
def _no_dead_network_outlives_a_test(request: pytest.FixtureRequest):
    yield
    if _root(request.node):
        from testbed.clean import clean

        clean()  # networks whose owner (an `aggnet` subprocess) is gone


@pytest.fixture(autouse=True, scope="module")
def _no_network_outlives_a_module(request: pytest.FixtureRequest):
    yield
    if _root(request.node):
        from testbed.clean import clean

        clean(all_records=True)
