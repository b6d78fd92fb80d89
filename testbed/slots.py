"""Run slots: what lets several networks run side by side on one machine without colliding.

A running network holds one slot (a lock file in testbed.clean.STATE_DIR) for its lifetime.
Slot n gives every name and number the network puts in the shared root namespace its own:

- switch interfaces: the kernel's name is the slot's prefix and Mininet's (`s1-eth1` in slot 0,
  `a1-s1-eth1` in slot 1): Linux allows 15 characters, `a19-s125-eth10` is 14;
- the kernel's interface group of the network's root-namespace interfaces (`ip link show group G`),
  which also deletes them all at once (`ip link del group G`: one batch in the kernel);
- P4Runtime and side-channel (Thrift) ports: the topology's plus PORT_STRIDE * n;
- the nftables table of BMv2's link loss.

Slot 0 has no prefix and no port offset: a network alone on its machine is named as Mininet and
simple_switch_grpc users know it. Host interfaces (`h1-eth0`) live in the hosts' own namespaces and
keep their names in every slot; what a run writes (results, pcaps, logs' file names) names ports
the native way. Slot 0's lock file is the one the single-network lock of earlier versions took,
so such a version waits for (and is waited for by) a slot-0 network. A slot is taken only when
its lock is free, its ports can be bound and none of its interfaces exists (leftovers of a killed
run in that slot: `aggnet clean` removes them); else the next one is tried.
"""
from __future__ import annotations

import errno
import fcntl
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO

from testbed import clean

MAX_SLOTS = 20
PORT_STRIDE = 1000  # slot n's ports are slot 0's + n * PORT_STRIDE (below 32768, the ephemeral range)
GROUP_BASE = 41_000  # slot n's interfaces are in the kernel's interface group GROUP_BASE + n
IFNAMSIZ = 15  # the longest interface name Linux takes
LOCK_FILE = os.path.join(clean.STATE_DIR, "network.lock")


class NoSlot(Exception):
    """No run slot is free on this machine (one line naming why each was refused)."""

    exit_code = 1


@dataclass
class RunSlot:
    """Slot `index`, held while `lock` is open (see the module docstring)."""

    index: int
    lock: IO | None = None

    @property
    def prefix(self) -> str:
        """What the kernel's switch interface names start with: "" in slot 0, "a1-" in slot 1."""
        return f"a{self.index}-" if self.index else ""

    @property
    def port_offset(self) -> int:
        return self.index * PORT_STRIDE

    @property
    def group(self) -> int:
        return GROUP_BASE + self.index

    @property
    def nft_table(self) -> str:
        return clean.NFT_TABLE + (f"_{self.index}" if self.index else "")

    def kernel_name(self, name: str) -> str:
        """The kernel's name of root-namespace interface `name` (Mininet's `s1-eth1`)."""
        return self.prefix + name

    def native_name(self, kernel_name: str) -> str:
        """Mininet's name of a kernel interface name of this slot."""
        return kernel_name.removeprefix(self.prefix)

    def release(self) -> None:
        if self.lock is not None:
            self.lock.close()  # closing releases the flock
            self.lock = None


def lock_file(index: int) -> str:
    """Slot `index`'s lock in this network namespace: LOCK_FILE (slot 0 in the root namespace), with
    the namespace's inode in any other (names and ports only collide within one namespace)."""
    ns = clean.netns_inode()
    root = clean.netns_inode("1") or clean.netns_inode("2")  # init's, or kthreadd's where init's is not ours to read
    base = LOCK_FILE if ns is None or root is None or ns == root else os.path.join(clean.STATE_DIR,
                                                                                  f"network-{ns}.lock")
    return base if index == 0 else base.removesuffix(".lock") + f".{index}.lock"


def port_free(port: int) -> bool:
    """Whether a server could listen on 127.0.0.1:`port` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: a closed run's TIME_WAIT is no owner
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def _refusal(slot: RunSlot, ports: Iterable[int], interfaces: Iterable[str], existing: set[str]) -> str | None:
    """Why `slot` cannot take a network with these (slot 0) ports and interfaces; None when it can."""
    for name in interfaces:
        kernel = slot.kernel_name(name)
        if len(kernel) > IFNAMSIZ:
            return f"interface name {kernel} is longer than Linux's {IFNAMSIZ} characters"
        if kernel in existing:
            return f"interface {kernel} exists (a killed run's? `aggnet clean` removes it)"
    for port in ports:
        shifted = port + slot.port_offset
        if shifted > 65535:
            return f"port {shifted} is past 65535"
        if not port_free(shifted):
            return f"port {shifted} is in use"
    return None


def acquire_slot(ports: Iterable[int], interfaces: Iterable[str]) -> RunSlot:
    """The first free slot for a network with these slot-0 TCP ports and root-namespace interface names;
    NoSlot (one line) when none is."""
    ports, interfaces = sorted(set(ports)), list(interfaces)
    os.makedirs(clean.STATE_DIR, exist_ok=True)
    existing = set(clean.root_interfaces())
    refused = []
    for index in range(MAX_SLOTS):
        lock = open(lock_file(index), "a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue  # another network holds it
        slot = RunSlot(index, lock)
        why = _refusal(slot, ports, interfaces, existing)
        if why is None:
            lock.seek(0)
            lock.truncate()
            lock.write(str(os.getpid()))
            lock.flush()
            return slot
        slot.release()
        refused.append(f"slot {index}: {why}")
    held = MAX_SLOTS - len(refused)
    raise NoSlot(f"aggnet: no free run slot for the network ({held} of {MAX_SLOTS} held by other networks"
                 + (f"; {'; '.join(refused[:3])}" if refused else "") + ")")
