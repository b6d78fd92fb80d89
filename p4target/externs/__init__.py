"""One home per v1model extern and BMv2 primitive: a module each, registered by name (p4target/extern_registry.py).

Nothing here runs on import: the composition root (the switch, the CLI, the STF runner, a test) calls
`load()`, which imports every module in this folder, each registering its externs. Adding an extern is
adding its module here (or, for a test's own, importing that module).
"""
import importlib
import pkgutil


def load() -> None:
    """Register every extern of this folder (again: nothing; a module is imported once)."""
    for module in pkgutil.iter_modules(__path__):
        if module.name != "base":
            importlib.import_module(f"{__name__}.{module.name}")
