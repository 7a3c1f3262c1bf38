"""A JSON value checked against the type a record's field declares, so that a file zerograd reads
with a value of the wrong type is one line naming the field and what was expected, never a
traceback far from the file.

``wrong_type(cls, data)`` checks a record's JSON object (``records.build`` calls it for every
record it makes); ``checker(hint)`` checks one value against an annotation (run.json's ``sweep``
options). The annotations are the dataclasses' own (``typing.get_type_hints``, read once per
class): ``int`` (a JSON ``true`` is not an integer), ``float`` (an integer is a number too),
``str``, ``bool``, ``X | None``, ``list[X]``, ``dict[str, X]``, ``Any``, an ``enum.Enum``
(one of its values) and a record (built before the record that holds it). Inside a list or an
object a number may be ``null``: JSON has no NaN, and ``records.finite`` writes one as null.

This module imports only the standard library.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# where in a value the wrong part is ("", "[3]", ".window[0]"), that part, what was expected
Problem = tuple[str, Any, str]


@dataclass(frozen=True, slots=True)
class Kind:
    """One annotation compiled: ``fits`` is the fast test, ``explain`` (run only on a value that
    does not fit) finds the wrong part; ``one`` and ``many`` say what fits, in words."""

    fits: Callable[[Any], bool]
    explain: Callable[[Any], Problem]
    one: str  # "an integer"
    many: str  # "integers"


def _scalar(test: Callable[[Any], bool], one: str, many: str) -> Kind:
    return Kind(test, lambda v: ("", v, one), one, many)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


ANYTHING = Kind(lambda v: True, lambda v: ("", v, "anything"), "anything", "values")
SCALARS = {
    bool: _scalar(lambda v: isinstance(v, bool), "true or false", "true or false values"),
    int: _scalar(_is_int, "an integer", "integers"),
    float: _scalar(_is_number, "a number", "numbers"),
    str: _scalar(lambda v: isinstance(v, str), "a string", "strings"),
}


def _nullable(kind: Kind, words: bool = True) -> Kind:
    """``kind`` or null (``words``: said so; else null is a number JSON cannot hold, NaN)."""
    if not words:
        one = kind.one
    elif kind is SCALARS[bool]:
        one = "true, false or null"
    else:
        one = f"{kind.one}{', ' if ' or ' in kind.one else ' '}or null"

    def explain(v: Any) -> Problem:
        where, bad, expected = kind.explain(v)
        return (where, bad, expected) if where else ("", v, one)

    many = f"{kind.many} or nulls" if words else kind.many
    return Kind(lambda v: v is None or kind.fits(v), explain, one, many)


def _union(kinds: list[Kind]) -> Kind:
    one = " or ".join(k.one for k in kinds)
    return Kind(
        lambda v: any(k.fits(v) for k in kinds),
        lambda v: ("", v, one),
        one,
        " or ".join(k.many for k in kinds),
    )


def _list(item: Kind) -> Kind:
    fits = item.fits

    def explain(v: Any) -> Problem:
        if not isinstance(v, list):
            return ("", v, f"a list of {item.many}")
        i = next(i for i, x in enumerate(v) if not fits(x))
        where, bad, expected = item.explain(v[i])
        return (f"[{i}]{where}", bad, expected)

    return Kind(
        lambda v: isinstance(v, list) and all(map(fits, v)),
        explain,
        f"a list of {item.many}",
        f"lists of {item.many}",
    )


def _object(value: Kind) -> Kind:
    fits = value.fits
    one = "an object" if value is ANYTHING else f"an object of {value.many}"

    def explain(v: Any) -> Problem:
        if not isinstance(v, dict):
            return ("", v, one)
        key = next(k for k, x in v.items() if not fits(x))
        where, bad, expected = value.explain(v[key])
        return (f".{key}{where}", bad, expected)

    return Kind(
        lambda v: isinstance(v, dict) and all(map(fits, v.values())),
        explain,
        one,
        "objects" if value is ANYTHING else f"objects of {value.many}",
    )


def checker(hint: Any, inside: bool = False) -> Kind:
    """The ``Kind`` of an annotation; ``inside`` a list or an object, a number may be null."""
    if hint is Any:
        return ANYTHING
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        nullable = type(None) in args
        kinds = [checker(a, inside and not nullable) for a in args if a is not type(None)]
        kind = kinds[0] if len(kinds) == 1 else _union(kinds)
        return _nullable(kind) if nullable else kind
    if origin is list:
        return _list(checker(args[0], inside=True) if args else ANYTHING)
    if origin is dict:
        return _object(checker(args[1], inside=True) if args else ANYTHING)
    if hint in SCALARS:
        kind = SCALARS[hint]
        return _nullable(kind, words=False) if inside and hint is float else kind
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        values = [m.value for m in hint]
        words = f"one of {', '.join(str(v) for v in values)}"
        return _scalar(
            lambda v: isinstance(v, hint) or (isinstance(v, str | int) and v in values),
            words,
            words,
        )
    if isinstance(hint, type):  # a record (already built), or another class
        one = "an object" if dataclasses.is_dataclass(hint) else f"a {hint.__name__}"
        return _scalar(lambda v: isinstance(v, hint), one, f"{one}s")
    return ANYTHING  # an annotation JSON cannot hold: not checked here


_FIELDS: dict[type, dict[str, Kind]] = {}


def field_kinds(cls: type) -> dict[str, Kind]:
    """Each field of the record ``cls`` with its ``Kind`` (made once per class)."""
    kinds = _FIELDS.get(cls)
    if kinds is None:
        hints = typing.get_type_hints(cls)
        kinds = {f.name: checker(hints[f.name]) for f in dataclasses.fields(cls)}
        _FIELDS[cls] = kinds
    return kinds


def shown(value: Any) -> str:
    """A value as its file holds it, cut to 60 characters."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def wrong(name: str, problem: Problem) -> str:
    """``field 'NAME' is VALUE; valid: WHAT`` of a problem found in the field ``name``."""
    where, bad, expected = problem
    return f"field {f'{name}{where}'!r} is {shown(bad)}; valid: {expected}"


def wrong_type(cls: type, data: dict[str, Any]) -> tuple[str, Problem] | None:
    """The first field of ``data`` (a record's JSON object, whose keys are fields of ``cls``
    and whose records are built) whose value is not of the field's type: (its name, the
    problem); None when every one is."""
    kinds = field_kinds(cls)
    for name, value in data.items():
        kind = kinds.get(name)
        if kind is not None and not kind.fits(value):
            return name, kind.explain(value)
    return None
