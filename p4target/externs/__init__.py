"""One home per v1model extern and BMv2 primitive: a module each, registered by name (see base.py).

Importing the package (which importing any of its modules does first) registers every module below;
the lowering, the BMv2 checks and both back ends find an extern through base.py's `for_call`,
`for_type`, `for_function` and `for_primitive`.
"""
from p4target.externs import (  # noqa: F401
                              action_profile,
                              add_to_field,
                              assertion,
                              checksum,
                              checksum16,
                              clone,
                              counter,
                              digest,
                              hash,
                              log_msg,
                              mark_to_drop,
                              meter,
                              random,
                              register,
                              resubmit,
                              truncate,
)
from p4target.externs.base import Extern, for_call, for_function, for_primitive, for_type, registered

__all__ = ["Extern", "for_call", "for_function", "for_primitive", "for_type", "registered"]
