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
    if not size:
        return b""
    if ptr == 0:
        # ctypes.string_at(0, n) returns n bytes of uninitialised memory.
        raise ValueError(f"ptr_to_bytes: ptr is 0 (a null pointer), cannot read {size} bytes there")
    # A ctypes array, not ctypes.string_at: that takes the size as a C int,
    # so 2**32 + 3 bytes came back as 3 and 2**31 raised SystemError.
    return (ctypes.c_char * size).from_address(ptr).raw
