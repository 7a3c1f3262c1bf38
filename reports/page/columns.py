"""The per-strategy table's columns, in order, each declared once: its header and how its cells
are made. The template (``report.html.j2``'s ``case_table``) lays out the headers and every
line from this list, and a failed case's line spans exactly the measured columns, so that a
column added here is in the header, in every line and in the failed lines' span alike.

A column is a cell macro of the template (``key``: ``cell_KEY`` there, for cells with markup
of their own) or a figure of the case's rows (``figure``: a row field's median over the case's
processes, as text). A new figure a row carries is one line here::

    Column("tokens_per_second", "tokens/s", figure=row_median("tokens_per_second", "{:,.0f}"))

The strategy, K and N lead each line and the processes close it; they are not columns here.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the per-strategy table, or a group of them under one header."""

    key: str  # the template's ``cell_KEY`` macro, or the row figure's name
    head: str  # the header (HTML); a group's title when it has ``sub``
    sub: tuple[str, ...] = ()  # a group's own headers, one cell each
    text: bool = False  # a group of words: its own headers left-aligned, as its cells are
    sync: bool = False  # shown only where some case's ranks sync gradients
    figure: Callable[[Any], str] | None = None  # a plain figure's text, from the case's line

    @property
    def width(self) -> int:
        """How many cells it makes in a line."""
        return len(self.sub) or 1


def row_median(name: str, form: str = "{:g}") -> Callable[[Any], str]:
    """A figure of the case's ok rows (``Row.NAME``), its median over them, as ``form`` says;
    "-" where no row has it."""

    def text(line: Any) -> str:
        values = [value for row in line.rows if (value := getattr(row, name)) is not None]
        return form.format(statistics.median(values)) if values else "-"

    return text


CASE_COLUMNS = (
    Column("window", "window ms<br>median<br>(CI)"),
    Column("overhead", "overhead<br>× plain<br>loop (CI)"),
    Column(
        "vs_native",
        "vs <code>native</code>: verdict, ratio (CI)",
        sub=("window", "peak", "held"),
        text=True,
    ),
    Column("reset", "reset<br>ms"),
    Column("sync", "sync<br>ms", sync=True),
    Column("allreduce", "all-reduces<br>per window", sync=True),
    Column("memory", "memory, MiB", sub=("held", "peak", "plain<br>loop peak")),
    Column("growth", "growth<br>KiB/<br>window"),
    Column("grad_check", "gradient<br>check"),
    Column("cpu_pressure", "CPU<br>pressure"),
    Column("switches", "context<br>switches/s<br>invol. / vol."),
    Column("pinned", "pinned<br>to cores"),
    Column("cv", "CV"),
)


def case_columns(has_sync: bool) -> list[Column]:
    """The columns this sweep's table shows (the sync columns only where ranks sync)."""
    return [c for c in CASE_COLUMNS if has_sync or not c.sync]
