"""Launchers: an interpreter with a program's modules loaded, forking that program's processes instead
of starting each from nothing.

An `aggnet switch` process spends ~0.35 s of CPU starting Python and importing gRPC, the P4Runtime
stubs, numpy and the native engine before it listens; 80 of them at once (fat-tree k=8) kept both
cores busy for 15 s, and on a loaded machine the last ones were not up 30 s later. A host's
`python -m hosts bench` spends ~0.3 s more on numpy and its modules, 64 of them as much again.
Forked from `python -m testbed.launcher`, which has imported all that once (and, for switches,
read the compiled form of the program the controller is going to push: p4target.compiled), a
process is up in a few milliseconds of CPU and shares those pages with its siblings.

It is the same program: the child runs the command line's own entry point (`-m testbed.cli`:
testbed.cli.main, so `aggnet switch`; `-m hosts`: hosts.roles.main) with its arguments, its output
appended to its log, its environment and working folder as given, its title (ps, /proc/PID/cmdline)
that command line, and it gets SIGTERM when the launcher ends (which gets SIGTERM when its testbed
ends). A host's process first joins that host's network and mount namespaces and a session of
its own, as Mininet's `mnexec -da PID` does. The launcher's own environment is what the children
start with below Python (a host launcher's has the hosts' malloc settings, testbed.nodes).

Protocol over the launcher's stdin/stdout, one JSON object a line: a request {"argv": [...],
"log": PATH, "env": {...}, "cwd": PATH|null, "namespaces_of": PID|null} is answered {"pid": N};
when a child exits the launcher reports {"exited": N, "code": C} (negative: killed by signal -C).
When stdin closes, the launcher stops its children (SIGTERM, SIGKILL after STOP_GRACE_S), reports
their exits and ends. It is started with TITLE_SPACE bytes of padding in its command line: the
memory a child writes its title into (the way setproctitle does).

`Launcher` is the testbed's side; `launch(...)` sends a request and returns a `LaunchedProcess` at
once (its pid known when the launcher answers), which the node uses as it would the subprocess.Popen
of a process it started itself.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

ENTRIES = {"testbed.cli": "testbed.cli", "hosts": "hosts.roles"}  # `python -m X` -> the module whose main() it runs
SWITCH_MODULES = ("testbed.cli", "p4target.switch", "p4target.runtime.server", "p4target.native.pipeline",
                  "p4target.sidechannel", "p4target.runtime.bmv2_thrift.service", "p4target.compiled")
HOST_MODULES = ("numpy", "hosts.roles", "hosts.agent_config", "hosts.allreduce", "hosts.allreduce_bench")
TITLE_SPACE = 8192
STOP_GRACE_S = 5.0
PR_SET_PDEATHSIG = 1
ARG_START, ARG_END = 45, 46  # /proc/PID/stat fields 48 and 49, counted after the command name (0: state)


class LaunchError(Exception):
    """The launcher cannot start a process (one line naming why)."""

    exit_code = 1


# ---------------------------------------------------------------------------- the launcher process

def serve(argv: list[str] | None = None) -> int:
    """The launcher's loop (see the module docstring); returns once stdin closes and its children are gone."""
    from testbed.cli import no_grpc_fork_handlers

    parser = argparse.ArgumentParser(prog="python -m testbed.launcher")
    parser.add_argument("padding", help="room for the children's titles")
    parser.add_argument("--preload", default="", help="modules to import before forking (comma-separated)")
    parser.add_argument("--program", help="a P4 program whose compiled form to read before forking")
    args = parser.parse_args(argv)
    no_grpc_fork_handlers()  # before gRPC loads: a child creates its server after the fork
    for module in filter(None, args.preload.split(",")):
        importlib.import_module(module)
    if args.program:
        from p4target.compiled import keep_printed
        from p4target.errors import P4Error
        from p4target.runtime.device import DEVICE_CONFIG_FILENAME

        try:
            keep_printed(args.program, DEVICE_CONFIG_FILENAME)
        except P4Error:
            pass  # nothing kept: pushed, the program fails on each switch, which says why to the controller
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd hears of exits
    children: set[int] = set()
    pending = b""
    while True:
        ready, _, _ = select.select([0, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            _reap(children)
        if 0 in ready:
            data = os.read(0, 65536)
            if not data:
                break
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                pid = _fork(json.loads(line), wake_r, wake_w)
                children.add(pid)
                _report({"pid": pid})
    _stop(children)
    return 0


def _report(message: dict) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def _reap(children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        _report({"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def _stop(children: set[int]) -> None:
    for pid in children:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while children:
        _reap(children)
        if time.monotonic() > deadline:
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(0.01)


def _fork(request: dict, *launcher_fds: int) -> int:
    """Fork a child running `request["argv"]`; its pid. The child never returns."""
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the launcher ended before the line above
            os._exit(1)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        for fd in launcher_fds:
            os.close(fd)
        if request.get("namespaces_of"):
            enter_namespaces(request["namespaces_of"])
            os.setsid()
        if request.get("cwd"):
            os.chdir(request["cwd"])
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        os.environ.clear()
        os.environ.update(request["env"])
        argv = request["argv"]
        set_title(argv)
        sys.argv = [argv[0], *argv[3:]]
        code = importlib.import_module(ENTRIES[argv[2]]).main(argv[3:])
    except BaseException:  # noqa: BLE001 - the child must end here whatever happens
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def enter_namespaces(pid: int) -> None:
    """Join the network and mount namespaces of process `pid` (a Mininet host's shell), as `mnexec -a PID`."""
    libc = ctypes.CDLL(None, use_errno=True)
    for kind in ("net", "mnt"):
        fd = os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY)
        try:
            if libc.setns(fd, 0) != 0:
                raise OSError(ctypes.get_errno(), f"setns into {kind} namespace of pid {pid}")
        finally:
            os.close(fd)


def set_title(argv: list[str]) -> None:
    """Make this process's command line (ps, /proc/PID/cmdline) `argv`: written over the launcher's own,
    whose padding (TITLE_SPACE) leaves room; LaunchError when it does not fit."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start, end = int(fields[ARG_START]), int(fields[ARG_END])
    title = b"\0".join(a.encode() for a in argv) + b"\0"
    if len(title) > end - start:
        raise LaunchError(f"command line of {len(title)} bytes does not fit the launcher's {end - start}")
    ctypes.memmove(start, title + b"\0" * (end - start - len(title)), end - start)


# ---------------------------------------------------------------------------- the testbed's side

class LaunchedProcess:
    """A process the launcher forked, used as a subprocess.Popen: pid, poll, wait, send_signal, terminate, kill."""

    stdin: IO[bytes] | None = None  # its stdin is /dev/null

    def __init__(self, launcher: Launcher, args: list[str]):
        self.launcher, self.args = launcher, args
        self.forked: int | None = None  # its pid, once the launcher has answered

    @property
    def pid(self) -> int:
        """Its pid (waits for the launcher's answer: requests are sent without waiting for one)."""
        return self.launcher.pid_of(self)

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        if self.forked is None and not self.launcher.answered(self):
            return None  # still being forked
        return self.launcher.exit_code(self.pid)

    def wait(self, timeout: float | None = None) -> int:
        code = self.launcher.wait_exit(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Launcher:
    """The testbed's handle on a launcher process (see the module docstring): `env` its environment,
    `preload` the modules it imports, `program` a P4 program whose compiled form it reads first."""

    def __init__(self, env: Mapping[str, str], preload: Sequence[str], program: str | None = None):
        self._exits: dict[int, int] = {}
        self._waiting: list[LaunchedProcess] = []  # requests sent, in order, not answered yet
        self._changed = threading.Condition()
        argv = [sys.executable, "-m", "testbed.launcher", "x" * TITLE_SPACE, "--preload", ",".join(preload),
                *(["--program", program] if program else [])]
        self.process = subprocess.Popen(["setpriv", "--pdeathsig", "TERM", "--", *argv], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env={**env, "OPENBLAS_NUM_THREADS": "1"})
        self._reader = threading.Thread(target=self._read, name="launcher-replies", daemon=True)
        self._reader.start()

    @staticmethod
    def runs(argv: Sequence[str]) -> bool:
        """Whether a launcher can fork this command line (`sys.executable -m testbed.cli|hosts ...`)."""
        return len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m" and argv[2] in ENTRIES

    def launch(self, argv: list[str], log: str, env: Mapping[str, str], cwd: str | None = None,
               namespaces_of: int | None = None) -> LaunchedProcess:
        """Fork `argv` (see `runs`) with its output appended to the file `log`; in the namespaces of process
        `namespaces_of` (a host's shell) when given."""
        if not self.runs(argv):
            raise LaunchError(f"a launcher runs `{sys.executable} -m testbed.cli|hosts ...`, not {argv[:3]}")
        request = {"argv": argv, "log": os.path.abspath(log), "env": dict(env), "cwd": cwd,
                   "namespaces_of": namespaces_of}
        process = LaunchedProcess(self, argv)
        with self._changed:  # its answer (the pid) comes while the caller goes on: 80 switches fork meanwhile
            assert self.process.stdin is not None, "started with a pipe"
            try:
                self.process.stdin.write((json.dumps(request) + "\n").encode())
                self.process.stdin.flush()
            except BrokenPipeError:
                raise LaunchError(f"the launcher exited with code {self.process.wait()}") from None
            self._waiting.append(process)
        return process

    def answered(self, process: LaunchedProcess) -> bool:
        with self._changed:
            return process.forked is not None

    def pid_of(self, process: LaunchedProcess) -> int:
        """A launched process's pid, once the launcher has answered; LaunchError if it ended first."""
        with self._changed:
            while process.forked is None:
                if not self._reader.is_alive():
                    raise LaunchError(f"the launcher exited with code {self.process.wait()} before it forked "
                                      f"{' '.join(process.args[:4])}")
                self._changed.wait(0.1)
            return process.forked

    def exit_code(self, pid: int) -> int | None:
        """A child's exit code as the launcher reported it; None while it runs. A child of a launcher that
        ended without reporting it got SIGTERM then (PR_SET_PDEATHSIG): -SIGTERM once it is gone."""
        with self._changed:
            if pid in self._exits or self._reader.is_alive():
                return self._exits.get(pid)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return -signal.SIGTERM
        return None

    def wait_exit(self, pid: int, timeout: float | None) -> int | None:
        """The child's exit code once it exits, or None after `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.exit_code(pid)) is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            with self._changed:
                self._changed.wait(0.05 if left is None else min(left, 0.05))
        return code

    def _read(self) -> None:
        assert self.process.stdout is not None, "started with a pipe"
        for line in self.process.stdout:
            message: dict[str, Any] = json.loads(line)
            with self._changed:
                if "pid" in message:
                    self._waiting.pop(0).forked = message["pid"]
                else:
                    self._exits[message["exited"]] = message["code"]
                self._changed.notify_all()

    def stop(self) -> None:
        """Close its stdin: it stops what still runs, reports it, and ends."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        self.process.wait()
        self._reader.join()


if __name__ == "__main__":
    sys.exit(serve())
