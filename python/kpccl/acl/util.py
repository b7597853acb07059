"""``acl.util``: host buffers as addresses and back, as in pyACL."""

import ctypes
import operator
import sys

#: The largest host address.
_PTR_MAX = 2 ** (8 * ctypes.sizeof(ctypes.c_void_p)) - 1


def bytes_to_ptr(data):
    """The address of ``data``'s memory, as an ``int``, without copying:
    ``bytes`` (read-only: use it only as a copy source) or any writable,
    C-contiguous buffer (``bytearray``, a writable ``memoryview``, a numpy
    array; a strided view raises ``ValueError``). Keep
    ``data`` alive while the address is in use."""
    if isinstance(data, bytes):
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    view = memoryview(data)
    if view.readonly:
        raise ValueError("bytes_to_ptr needs bytes or a writable buffer")
    if not view.c_contiguous:
        # Its bytes are not one run in C order: no address stands for them.
        raise ValueError(
            f"bytes_to_ptr needs a C-contiguous buffer, not a strided view of shape {view.shape} "
            "(copy it first: numpy.ascontiguousarray, bytes)"
        )
    if view.nbytes == 0:
        return 0
    return ctypes.addressof(ctypes.c_char.from_buffer(view.cast("B")))


def ptr_to_bytes(ptr, size):
    """A ``bytes`` copy of ``size`` bytes at host address ``ptr``."""
    ptr = _int(ptr, "ptr", _PTR_MAX)
    size = _int(size, "size", sys.maxsize)
    if not size:
        return b""
    if ptr == 0:
        # ctypes.string_at(0, n) returns n bytes of uninitialised memory.
        raise ValueError(f"ptr_to_bytes: ptr is 0 (a null pointer), cannot read {size} bytes there")
    # A ctypes array, not ctypes.string_at: that takes the size as a C int,
    # so 2**32 + 3 bytes came back as 3 and 2**31 raised SystemError.
    return (ctypes.c_char * size).from_address(ptr).raw


def _int(value, what, most):
    """``value`` as an int from 0 to ``most``, numpy's ints included (as
    ``acl.rt`` takes them); a ``ValueError`` naming it otherwise."""
    try:
        n = operator.index(value)
    except TypeError:
        raise ValueError(f"ptr_to_bytes: {what} must be an int, not {type(value).__name__}") from None
    if not 0 <= n <= most:
        raise ValueError(f"ptr_to_bytes: {what} = {n} is out of range: 0 to {most}")
    return n
