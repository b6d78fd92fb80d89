"""`State` with its data-plane half in native memory: state.py (NativeState) and one module per kind of object,
each the twin of its namesake in p4target/state/."""
from p4target.native.store.state import EngineLock, NativeState

__all__ = ["EngineLock", "NativeState"]
