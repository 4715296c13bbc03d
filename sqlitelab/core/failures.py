"""How the lab classifies a response that is not a success (shared by the Locust recorder)."""
from __future__ import annotations


def failure_kind(status: int, exception: BaseException | None = None) -> str | None:
    """'busy' (503: SQLITE_BUSY escaped), 'server_error' (other 5xx), 'client_error' (4xx),
    'timeout' or 'connection' (no response), or None for a success or redirect."""
    if status == 503:
        return "busy"
    if status >= 500:
        return "server_error"
    if status >= 400:
        return "client_error"
    if status == 0 or (exception is not None and status < 200):
        text = f"{type(exception).__name__} {exception}".lower()
        return "timeout" if "timeout" in text or "timed out" in text else "connection"
    return None
