"""The device config a P4Runtime client pushes to the embedded target: the program's P4 source.

The switch compiles the source it is sent (SetForwardingPipelineConfig.p4_device_config)
without the folder it came from, so the config must be self-contained: every local
`#include "file"` is replaced by that file's text, recursively, relative to the including
file, between `#line` markers so errors still name the file and line they are in.
`#include <core.p4>` and `<v1model.p4>` stay: the target ships those, and they are all a
program given as text may include (p4target.frontend.preprocess).
`aggnet p4 compile PROG.p4 --device-config OUT.p4` writes it; the controller pushes the same,
and `aggnet switch PROG.p4` loads the same text.
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
    text = _read(path, None)
    inlined = _inline(path, path, text, 0)
    return text if inlined == text else f'#line 1 "{path}"\n{inlined}'


def _read(path: str, included_from: tuple[str, int] | None) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeError) as exc:
        raise P4Error(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}",
                      *(included_from or (path,))) from None


def _inline(path: str, shown: str, text: str, depth: int) -> str:
    """`text`, of file `path`, with its local includes inlined; `shown` names `path` in #line markers (its path from
    the top file's, as that was given)."""
    here = os.path.dirname(os.path.abspath(path))

    def include(m: re.Match) -> str:
        local = os.path.join(here, m.group(1))
        if not os.path.isfile(local) and os.path.isfile(os.path.join(INCLUDE_DIR, m.group(1))):
            return m.group(0)  # `#include "v1model.p4"`: the target's own, as cpp finds it
        line = text.count("\n", 0, m.start()) + 1
        if depth >= MAX_INCLUDE_DEPTH:
            raise P4Error(f"#include nesting deeper than {MAX_INCLUDE_DEPTH} (an include loop?)", path, line)
        inner_shown = os.path.normpath(os.path.join(os.path.dirname(shown), m.group(1)))
        inner = _inline(local, inner_shown, _read(local, (path, line)), depth + 1)
        end = "" if inner.endswith("\n") else "\n"
        return f'#line 1 "{inner_shown}"\n{inner}{end}#line {line + 1} "{shown}"'

    return _LOCAL_INCLUDE.sub(include, text)


def bmv2_json_in(config: bytes) -> bytes | None:
    """The BMv2 JSON a device config carries, bare or wrapped in BMv2's P4DeviceConfig; None for P4 source.

    P4DeviceConfig (`p4/tmp/p4config.proto`: reassign = 1, extras = 2, device_data = 3) is read
    from its wire form, so no stubs are needed for it.
    """
    if config.lstrip()[:1] == b"{":
        return config
    data = _protobuf_field(config, 3)
    return data if data is not None and data.lstrip()[:1] == b"{" else None


def _protobuf_field(buf: bytes, number: int) -> bytes | None:
    """The last length-delimited field `number` of a protobuf message; None if absent or not protobuf."""
    found, i = None, 0
    try:
        while i < len(buf):
            key, i = _varint(buf, i)
            kind = key & 7
            if kind == 0:
                _, i = _varint(buf, i)
            elif kind == 2:
                size, i = _varint(buf, i)
                if i + size > len(buf):
                    return None
                if key >> 3 == number:
                    found = buf[i:i + size]
                i += size
            elif kind in (1, 5):
                i += 8 if kind == 1 else 4
            else:
                return None
    except IndexError:
        return None
    return found


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
