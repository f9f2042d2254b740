"""The page checksums of a Parquet file, checked without decoding a value.

A page may carry the CRC-32 of its bytes as stored (compressed) in its header. This walks every
page of every column chunk, reading only the page headers (Thrift compact protocol) and, for a
page with a CRC, its bytes, and compares them with zlib.crc32, which is the CRC Parquet specifies.

`pages_ok` answers True only when the walk accounted for every byte of every column chunk and
every CRC present matched. Anything else (a mismatch, a header it cannot parse, a chunk whose pages
do not add up, encryption) answers False, and the caller reads the file with pyarrow's own
verification, which gives the exact error. So this can only spare a decoding read, never pass a
page that pyarrow would refuse.
"""

from __future__ import annotations

import zlib
from typing import BinaryIO

import pyarrow.parquet as pq

_HEADER_READ = 512  # bytes read for a page header; a longer one (large statistics) is read again whole


class _Unreadable(Exception):
    """The bytes are not what a page header should be."""


class _Reader:
    """Thrift compact protocol, just enough to read a PageHeader and skip what it does not need."""

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


def encrypted(path: str) -> bool:
    """The file uses Parquet modular encryption: an encrypted footer (magic `PARE`), or a plaintext footer
    that names an encryption algorithm (FileMetaData field 8, or 9: the footer signing key). Told from the
    bytes alone, before any Parquet reader sees them: Arrow's reader aborts the process on a plaintext footer
    whose column metadata it cannot decrypt."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            if size < 12:
                return False
            fh.seek(size - 8)
            tail = fh.read(8)
            if tail[4:] == b"PARE":
                return True
            length = int.from_bytes(tail[:4], "little")
            if tail[4:] != b"PAR1" or not 0 < length <= size - 12:
                return False
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


_MISSING = -(1 << 40)  # no CRC in the header (a CRC is a 32-bit value)


def _page(fh: BinaryIO, offset: int) -> tuple[int, int, int]:
    """(header length, compressed page size, crc or _MISSING) of the page header at `offset`."""
    size = _HEADER_READ
    while True:
        fh.seek(offset)
        data = fh.read(size)
        reader = _Reader(data)
        try:  # PageHeader: 3 compressed_page_size, 4 crc
            fields = reader.struct({3: -1, 4: _MISSING})
        except _Unreadable:
            if len(data) < size:  # the file ends inside the header
                raise
            size *= 8
            if size > 1 << 24:
                raise
            continue
        if fields[3] < 0:
            raise _Unreadable("page header without a size")
        return reader.pos, fields[3], fields[4]


def pages_ok(path: str, metadata: pq.FileMetaData) -> bool:
    """Every page of every column chunk walked, and every CRC present matches its page."""
    try:
        with open(path, "rb") as fh:
            for rg in range(metadata.num_row_groups):
                group = metadata.row_group(rg)
                for c in range(group.num_columns):
                    chunk = group.column(c)
                    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
                    if start is None or start < 4:
                        return False
                    pos, end = start, start + chunk.total_compressed_size
                    while pos < end:
                        length, size, crc = _page(fh, pos)
                        if crc != _MISSING:
                            fh.seek(pos + length)
                            body = fh.read(size)
                            if len(body) != size or zlib.crc32(body) != crc & 0xFFFFFFFF:
                                return False
                        pos += length + size
                    if pos != end:
                        return False
    except (_Unreadable, OSError):
        return False
    return True
