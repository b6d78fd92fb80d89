"""One home per v1model extern and BMv2 primitive: a module each, registered by name (see base.py).

Importing the package (which importing any of its modules does first) imports and so registers every
module in this folder: adding an extern is adding its module. The lowering, the BMv2 checks and both
back ends find an extern through base.py's `for_call`, `for_type`, `for_function` and `for_primitive`;
the P4Runtime server through `for_entity`.
"""
import importlib
import pkgutil

from p4target.externs.base import Extern, for_call, for_entity, for_function, for_primitive, for_type, registered

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["Extern", "for_call", "for_entity", "for_function", "for_primitive", "for_type", "registered"]
