"""The exceptions kpccl raises (bad arguments raise the built-in ValueError)."""

import builtins


class Error(Exception):
    """A failure of the kpccl library, with its message: a collective that
    failed on every rank, an abandoned window, an ACL call that failed."""


class PeerDeadError(Error):
    """A peer's process is gone (it died or left), so the wait or collective
    that needed it failed. ``rank`` is that peer's rank, when known."""

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
