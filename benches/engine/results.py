"""results.jsonl: one JSON row per finished case, appended, flushed and fsynced at once."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from reports.judge.rows import RESULTS, SCHEMA_VERSION, read
from reports.schema.records import finite

__all__ = ["RESULTS", "SCHEMA_VERSION", "append", "read"]


def append(directory: str | Path, row: dict[str, Any]) -> None:
    """Append one row and make it durable before returning: an interrupt loses nothing. A
    write that fails (a full disk) is cut back off, so no half line stays; OSError is raised."""
    row = {"schema_version": SCHEMA_VERSION, **row}
    data = (json.dumps(finite(row), allow_nan=False) + "\n").encode()
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
