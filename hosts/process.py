"""What every host process (worker agent, parameter server) does the same way: log to a
file under the run folder, and turn errors into one line on stderr plus an exit code."""
from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

INTERNAL_ERROR_EXIT = 3


def setup_logging(out_dir: str | Path, name: str) -> Path:
    """Log everything of this process to OUT_DIR/NAME.log; returns the path."""
    path = Path(out_dir) / f"{name}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return path


def run_main(body: Callable[[], int], who: str) -> int:
    """Run a process body: user errors (exit_code attribute) -> one line "WHO: message", traceback only in the log."""
    try:
        return body()
    except KeyboardInterrupt:
        print(f"{who}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place a host process turns errors into exit codes
        code = getattr(exc, "exit_code", None)
        if logging.getLogger().handlers:  # no log file yet (e.g. a bad config): stderr gets the one line only
            logging.getLogger("aggnet").error("%s", "".join(traceback.format_exception(exc)).rstrip())
        if code is None:
            print(f"{who}: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
            return INTERNAL_ERROR_EXIT
        print(f"{who}: {exc}", file=sys.stderr)
        return int(code)
