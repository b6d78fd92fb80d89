"""Run a command until it ends or until this process's stdin closes, whichever comes first.

    python testbed/tether.py CMD [ARG...]

A process started over ssh outlives its session: when the testbed's ssh client ends (the run
is over, or the testbed died), sshd only closes the session's pipes. Under the tether, the end
of stdin (the session) sends CMD SIGTERM (SIGKILL 5 s later), so nothing a run started on
another server is left behind. The exit status is CMD's (128 + N when signal N ended it, as a
shell reports it). Run by path: it imports nothing of AggNet.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading

GRACE_S = 5.0


def main(argv: list[str]) -> int:
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)

    def end_with_session() -> None:
        while os.read(0, 65536):  # unbuffered: a daemon thread must hold no lock at exit
            pass  # EOF: the session ended
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()

    threading.Thread(target=end_with_session, daemon=True).start()
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
