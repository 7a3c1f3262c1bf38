"""Option values from text, each checked where it is parsed: a bad one is one ``UsageError``
line naming the option, the value and the valid range (exit 2)."""

from __future__ import annotations

from benches.sweep.outdir import UsageError


def int_value(option: str, text: str, minimum: int, maximum: int | None = None) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise UsageError(f"{option} {text!r} is not an integer") from None
    if value < minimum or (maximum is not None and value > maximum):
        valid = f"an integer >= {minimum}" if maximum is None else f"{minimum} to {maximum}"
        raise UsageError(f"{option} {value} is out of range; valid: {valid}")
    return value


def int_list(option: str, text: str, minimum: int) -> list[int]:
    items = [item.strip() for item in str(text).split(",")]
    if not all(items):
        raise UsageError(f"{option} {text!r} has an empty item; valid: integers like 1,4")
    values = []
    for item in items:
        try:
            value = int(item)
        except ValueError:
            raise UsageError(f"{option} item {item!r} is not an integer (in {text!r})") from None
        if value < minimum:
            raise UsageError(f"{option} item {value} is out of range; valid: integers >= {minimum}")
        values.append(value)
    return list(dict.fromkeys(values))


def fraction(option: str, text: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise UsageError(
            f"{option} {text!r} is not a number; valid: a fraction like 0.02"
        ) from None
    if not 0 <= value < 1:
        raise UsageError(f"{option} {text!r} is out of range; valid: a fraction in [0, 1)")
    return value


def seconds(option: str, text: str | None, default: float) -> float:
    """A number of seconds >= 0 (``default`` when not given)."""
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise UsageError(f"{option} {text!r} is out of range; valid: seconds >= 0")
    return value


def threads_per_rank(threads: int, world_size: int) -> int:
    """``--threads`` is a process's total, split over its ranks, each at least one: each rank's
    share (a case's ``threads``: ``arguments.case_settings``)."""
    return max(1, threads // world_size)
