"""Reading the YAML files users write (topologies, experiments) with one-line errors."""
from __future__ import annotations

from typing import Any


def read_yaml(path: str, what: str, error: type[Exception]) -> Any:
    """Parse `path`; a missing file or bad YAML raises `error` naming the file (and line)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except OSError as exc:
        raise error(f"{path}: cannot read {what}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        raise error(f"{where}: YAML error: {getattr(exc, 'problem', None) or 'invalid YAML'}") from None
