"""The device config a P4Runtime client pushes to the embedded target: the program's P4 source.

The switch compiles the source it is sent (SetForwardingPipelineConfig.p4_device_config)
without the folder it came from, so the config must be self-contained: every local
`#include "file"` is replaced by that file's text, recursively, relative to the including
file. `#include <core.p4>` and `<v1model.p4>` stay: the target ships those.
`aggnet p4 compile PROG.p4 --device-config OUT.p4` writes it; the controller pushes the same.
"""
from __future__ import annotations

import os
import re

from p4target.errors import P4Error
from p4target.frontend.preprocess import INCLUDE_DIR

MAX_INCLUDE_DEPTH = 16
_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[^\n]*$', re.M)


def device_config_source(path: str) -> str:
    """The source of `path` with its local includes inlined; P4Error naming the file that cannot be read."""
    return _inline(path, None, 0)


def _inline(path: str, included_from: tuple[str, int] | None, depth: int) -> str:
    if depth > MAX_INCLUDE_DEPTH:
        raise P4Error(f"#include nesting deeper than {MAX_INCLUDE_DEPTH} (an include loop?)", *(included_from or ()))
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        where = included_from or (path,)
        raise P4Error(f"cannot read {path}: {exc.strerror}", *where) from None
    here = os.path.dirname(os.path.abspath(path))

    def include(m: re.Match) -> str:
        local = os.path.join(here, m.group(1))
        if not os.path.isfile(local) and os.path.isfile(os.path.join(INCLUDE_DIR, m.group(1))):
            return m.group(0)  # `#include "v1model.p4"`: the target's own, as cpp finds it
        line = text.count("\n", 0, m.start()) + 1
        return _inline(local, (path, line), depth + 1)

    return _LOCAL_INCLUDE.sub(include, text)
