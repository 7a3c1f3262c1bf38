"""results.jsonl: one JSON row per finished case, appended, flushed and fsynced at once."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from reports.schema.records import RESULTS, SCHEMA_VERSION, Row, encode

__all__ = ["RESULTS", "SCHEMA_VERSION", "append"]


def append(directory: str | Path, row: Row | dict[str, Any]) -> None:
    """Append one row (a ``Row``, or its JSON object as a case's process wrote it) and make it
    durable before returning: an interrupt loses nothing. A write that fails (a full disk) is
    cut back off, so no half line stays; OSError is raised."""
    if isinstance(row, Row):  # its JSON object: a field it was never given has no key (made)
        row = row.to_json()
    data = encode({"schema_version": SCHEMA_VERSION, **row}) + b"\n"
    fd = os.open(Path(directory) / RESULTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):  # not every file can be truncated (/dev/full)
                os.ftruncate(fd, start)
            raise
    finally:
        os.close(fd)
