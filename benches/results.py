"""results.jsonl: one JSON row per finished case, appended, flushed and fsynced at once."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from reports.rows import RESULTS, SCHEMA_VERSION, read

__all__ = ["RESULTS", "SCHEMA_VERSION", "append", "read"]


def _finite(value: Any) -> Any:
    # JSON has no NaN: a missing figure is null, so any reader can parse the file
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def append(directory: str | Path, row: dict[str, Any]) -> None:
    """Append one row and make it durable before returning: an interrupt loses nothing."""
    row = {"schema_version": SCHEMA_VERSION, **row}
    line = json.dumps(_finite(row), allow_nan=False) + "\n"
    with open(Path(directory) / RESULTS, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
