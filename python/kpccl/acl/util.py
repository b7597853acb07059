"""``acl.util``: host buffers as addresses and back, as in pyACL."""

import ctypes


def bytes_to_ptr(data):
    """The address of ``data``'s memory, as an ``int``, without copying:
    ``bytes`` (read-only: use it only as a copy source) or any writable
    buffer (``bytearray``, a writable ``memoryview``, a numpy array). Keep
    ``data`` alive while the address is in use."""
    if isinstance(data, bytes):
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0
    view = memoryview(data)
    if view.readonly:
        raise ValueError("bytes_to_ptr needs bytes or a writable buffer")
    if view.nbytes == 0:
        return 0
    return ctypes.addressof(ctypes.c_char.from_buffer(view.cast("B")))


def ptr_to_bytes(ptr, size):
    """A ``bytes`` copy of ``size`` bytes at host address ``ptr``."""
    if not isinstance(ptr, int) or not isinstance(size, int) or ptr < 0 or size < 0:
        raise ValueError("ptr_to_bytes(ptr, size) takes a host address and a size, both non-negative ints")
    return ctypes.string_at(ptr, size) if size else b""
