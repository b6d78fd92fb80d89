"""Backend "aggnet" for scripts that never import AggNet: torch's backend autoload entry point.

pyproject.toml declares `register` in the entry-point group "torch.backends"; `import torch` calls
every such entry point (torch/__init__.py, `_import_device_backends`; TORCH_DEVICE_BACKEND_AUTOLOAD=0
turns it off), so `init_process_group("aggnet")` works in a script whose only change is the backend's
name. Registering is cheap and imports nothing of AggNet: hosts.torch_backend (numpy, the all-reduce
clients) is imported when a script makes an "aggnet" group. The name only is added: the default
backend for CPU tensors stays gloo.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

BACKEND = "aggnet"


def register() -> None:
    """Register "aggnet" with torch.distributed (when torch has it); safe to call again."""
    import torch.distributed as dist

    if dist.is_available():
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])


def _create(store: Any, rank: int, world_size: int, timeout: timedelta) -> Any:
    from hosts.torch_backend import create

    return create(BACKEND, store, rank, world_size, timeout)
