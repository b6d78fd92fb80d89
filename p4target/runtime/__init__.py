"""P4Runtime v1 gRPC server of the embedded target; see p4target.runtime.server for the API."""
from p4target.runtime.server import RuntimeServer

__all__ = ["RuntimeServer"]
