"""The exceptions kpccl raises (bad arguments raise the built-in ValueError)."""

import builtins


class Error(Exception):
    """A failure of the kpccl library, with its message: a collective that
    failed on every rank, an ACL call that failed. The subclasses are the
    classes the Rust API's ``Error::kind()`` and the C API's
    ``kpccl_last_error_code()`` call a dead peer and a timeout."""


class PeerDeadError(Error):
    """A peer is gone: its process died or left the job, or it left the
    window (freed or dropped it) or abandoned it (a wait of its failed or
    was interrupted), so the wait or collective that needed it failed.
    ``rank`` is that peer's rank, when known (this rank's own when another
    thread of it abandoned the window)."""

    def __init__(self, message, rank=None):
        super().__init__(message)
        self.rank = rank


class TimeoutError(Error, builtins.TimeoutError):
    """A wait or collective gave up at its deadline (the window's ``timeout``,
    ``KPCCL_TIMEOUT_MS``, or the launcher's out-of-band timeout). Also a
    built-in ``TimeoutError``. ``rank`` is the rank that did not arrive, when known."""

    def __init__(self, message, rank=None):
        super().__init__(message)
        self.rank = rank


# Where users import and catch them: a traceback reads "kpccl.Error: …",
# not the private module's name.
for _class in (Error, PeerDeadError, TimeoutError):
    _class.__module__ = "kpccl"
del _class
