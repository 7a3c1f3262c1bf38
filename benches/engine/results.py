"""results.jsonl: one JSON row per finished case, appended, flushed and fsynced at once."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from reports.rows import RESULTS, SCHEMA_VERSION, finite, read

__all__ = ["RESULTS", "SCHEMA_VERSION", "append", "read"]


def append(directory: str | Path, row: dict[str, Any]) -> None:
    """Append one row and make it durable before returning: an interrupt loses nothing."""
    row = {"schema_version": SCHEMA_VERSION, **row}
    line = json.dumps(finite(row), allow_nan=False) + "\n"
    with open(Path(directory) / RESULTS, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
