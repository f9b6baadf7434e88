"""The few public errors the API answers with; each becomes `{"error": {"code", "message"}}`."""

from __future__ import annotations


class PublicError(Exception):
    status = 500
    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(PublicError):
    status = 404
    code = "not_found"


class BadParameter(PublicError):
    status = 400
    code = "bad_parameter"


class StillLoading(PublicError):
    status = 409
    code = "loading"


class TraceUnreadable(PublicError):
    status = 422
    code = "trace_error"


class SnapshotRefused(PublicError):
    """A memory snapshot that is unsafe (it asks to run code), not a snapshot, or too large."""

    status = 422
    code = "snapshot_error"
