"""Fixtures every test shares.

A test marked `root` runs real Mininet networks. Whatever way it ends (pass, failure, a
subprocess killed on timeout), what AggNet networks it left behind are torn down before the
next test starts, so one failing test never breaks the next with `File exists` on s1-eth1.
Networks this pytest process owns may be a module's shared fixture, so those go only when
the module is done; a network anyone else runs beside the tests (another run slot) is left alone.

$AGGNET_NATIVE_ONLY is set for this process and everything it starts (switches, `aggnet` runs): a
program meant for the native engine that cannot run on it is an error, never a silent run on the
Python engine that a test of the native engine would pass. A test of that fallback unsets it.
"""
from __future__ import annotations

import os

import pytest

from p4target.native.pipeline import NATIVE_ONLY_ENV
from testbed.cli import no_grpc_fork_handlers

no_grpc_fork_handlers()  # tests run networks in this process, which also holds gRPC channels
os.environ[NATIVE_ONLY_ENV] = "1"


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
        from testbed.clean import clean_networks

        clean_networks(lambda record: record["owner"] == os.getpid())


@pytest.fixture(scope="session")
def p4c_compiler(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The reference p4c for the whole session (tests/bmv2_ref.py): each program compiled once, in the
    background, whichever modules want its JSON, its P4Info or its warnings. Kept in pytest's cache folder
    when there is one (keyed by the sources and p4c's version), else in this session's temporary folder."""
    import bmv2_ref

    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider (scripts/test.sh)
    folder = cache.mkdir("p4c") if cache is not None else tmp_path_factory.mktemp("p4c")
    with bmv2_ref.Compiler(str(folder), workers=os.cpu_count() or 2) as compiler:
        yield compiler
