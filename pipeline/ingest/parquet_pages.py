"""Parquet modular encryption told from a file's bytes, before any Parquet reader sees them: just
enough of the Thrift compact protocol to walk the footer's top-level fields."""

from __future__ import annotations


class _Unreadable(Exception):
    """The bytes are not what a footer should be."""


class _Reader:
    """Thrift compact protocol, just enough to walk a struct and skip what it does not need."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise _Unreadable("header runs past the bytes read")
        self.pos += 1
        return self.data[self.pos - 1]

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise _Unreadable("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, kind: int) -> None:
        if kind in (1, 2):  # booleans live in the field header
            return
        if kind == 3:
            self.byte()
        elif kind in (4, 5, 6):
            self.varint()
        elif kind == 7:
            self.pos += 8
        elif kind == 8:
            size = self.varint()  # read before the position is used: the varint moves it
            self.pos += size
        elif kind in (9, 10):
            head = self.byte()
            size = head >> 4 if head >> 4 != 15 else self.varint()
            for _ in range(size):
                self.element(head & 0x0F)
        elif kind == 11:
            size = self.varint()
            if size:
                kinds = self.byte()
                for _ in range(size):
                    self.element(kinds >> 4)
                    self.element(kinds & 0x0F)
        elif kind == 12:
            self.struct({})
        else:
            raise _Unreadable(f"unknown field type {kind}")

    def element(self, kind: int) -> None:
        """A list, set or map element: there a boolean takes a byte of its own."""
        if kind in (1, 2):
            self.byte()
        else:
            self.skip(kind)

    def struct(self, wanted: dict[int, int]) -> dict[int, int]:
        """The i32 fields named in `wanted` (field id -> default) of the struct here; others skipped."""
        found, field = dict(wanted), 0
        while (head := self.byte()) != 0:
            delta, kind = head >> 4, head & 0x0F
            field = field + delta if delta else self.zigzag()
            if field in wanted and kind == 5:
                found[field] = self.zigzag()
            else:
                self.skip(kind)
        return found


def _tail(path: str) -> tuple[int, bytes] | None:
    """The file's size and its last 8 bytes (footer length, magic); None when it is too short or unreadable."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            if size < 12:
                return None
            fh.seek(size - 8)
            return size, fh.read(8)
    except OSError:
        return None


def encrypted_footer(path: str) -> bool:
    """The file ends in `PARE`: its footer is encrypted (cheap: reads 8 bytes)."""
    tail = _tail(path)
    return tail is not None and tail[1][4:] == b"PARE"


def encrypted(path: str) -> bool:
    """The file uses Parquet modular encryption: an encrypted footer (magic `PARE`), or a plaintext footer
    that names an encryption algorithm (FileMetaData field 8, or 9: the footer signing key). Told from the
    bytes alone: Arrow's reader aborts the process on a plaintext footer whose column metadata it cannot
    decrypt. Walking the footer in Python costs about a millisecond a file, so reading.py asks only about
    files a reader failed on."""
    found = _tail(path)
    if found is None:
        return False
    size, tail = found
    if tail[4:] == b"PARE":
        return True
    length = int.from_bytes(tail[:4], "little")
    if tail[4:] != b"PAR1" or not 0 < length <= size - 12:
        return False
    try:
        with open(path, "rb") as fh:
            fh.seek(size - 8 - length)
            reader = _Reader(fh.read(length))
        field = 0
        while (head := reader.byte()) != 0:
            delta, kind = head >> 4, head & 0x0F
            field = field + delta if delta else reader.zigzag()
            if field in (8, 9):
                return True
            reader.skip(kind)
    except (_Unreadable, OSError, RecursionError):
        return False
    return False
