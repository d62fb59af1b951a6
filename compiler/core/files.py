"""Reading a file up to a bound, as obc reads every file it is given."""

from __future__ import annotations

import os
from typing import BinaryIO


def read_at_most(stream: BinaryIO, limit: int) -> bytes:
    """Return the bytes of `stream` (an opened file), at most `limit` + 1 of them: one more
    than obc accepts, so that a caller can tell a file over the bound.

    `read(limit + 1)` alone would allocate the whole bound (a MiB) for each run file of a few
    hundred bytes, which cost more than the reading; so the file's size is asked first, and a
    file that grew since is read on to the bound."""
    size = os.fstat(stream.fileno()).st_size
    data = stream.read(min(size, limit) + 1)
    if len(data) > size:  # it grew after fstat: read what it holds now, to the bound
        data += stream.read(limit + 1 - len(data))
    return data
