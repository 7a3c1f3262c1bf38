"""A case's settings, each declared once: its flag, its help, its defaults, how its value is
read, and whether it is part of a case's identity (every setting that changes a case's figures:
resume skips, and pooling merges, only rows of one identity).

``CaseSettings`` is the one record; the rest is derived from its fields' metadata:

- the sweep's parser (``benches.sweep.options``: one option per field with a flag),
- the sweep's validated values (``benches.sweep.record.Sweep`` has every fixed setting,
  ``FixedSettings``), and the engine's ``CaseSpec`` (a ``CaseSettings`` with what a process
  needs besides),
- a results row's and a pooled case's identity fields (``reports.schema.records.Row``:
  ``RowIdentity``; ``Entry``: ``EntryIdentity``), ``CASE_KEY`` and ``SWEEP_IDENTITY``,
- the report's grouping key (``LOOP``: the settings that change the loop whose noise a group
  shares) and ``--resume``'s checks (``OPTION``: each setting's flag, for its one-line error).

A new setting, fixed or swept (``swept=True``: the sweep takes a list of values, the plan crosses
them, a case id names a value other than the default; ``loop=True``: each value is a group of
its own, which every swept setting must be: refused at import otherwise), is one field here
plus the one place in the engine that applies it (a ``Recipe`` field of the same name is filled
from the case).
Standard library and msgspec only: the engine, the sweep and the report all import it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

# the reference workload (benches.workloads.protocol.DEFAULT, which a test holds equal)
DEFAULT_WORKLOAD = "benches.workloads.transformer:workload"

# how a fixed setting's text is read (benches.sweep.arguments.setting_value): an integer
# (with ``minimum``/``maximum``), text, an on/off flag (``--x``), an on/off pair (``--x``,
# ``--no-x``), a repeatable option (a list)
KINDS = ("int", "text", "flag", "onoff", "list")


#: the suffix of a strategy label that runs the base build (``--base REF``): ``block@base``
BASE = "@base"


def setting(
    default: Any = dataclasses.MISSING,
    *,
    flag: str | None,
    help: str,
    kind: str = "text",
    identity: bool = True,
    swept: bool = False,
    loop: bool = False,
    cli_default: Any = None,
    dest: str | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    added_later: bool = False,
    metavar: str | None = None,
    factory: Any = None,
    choices: tuple[str, ...] | None = None,
    planned: bool = False,
    workload: bool = False,
) -> Any:
    """A field of ``CaseSettings`` with its metadata.

    flag: the option that sets it (None: set by another option, e.g. ``options`` by
    ``--strategies NAME:K=V``); help: its --help text (``{default}`` is the option's default);
    kind: how its text is read (``KINDS``); identity: part of a case's identity; swept: a
    sweep takes a list of values and crosses them; loop: it changes the loop a group of cases
    runs (the report's grouping key); cli_default: the sweep's value when the option is not
    given, as the command line spells it (None: the sweep works it out, e.g. the preset from
    the device); dest: the parser's name for it where it differs; minimum, maximum: an
    integer's range (a swept integer's every value); added_later: rows written before it
    existed ran its default; choices: the values it takes, checked where it is read
    (``check_value``: on the command line and where the engine builds its loop); planned: a
    sweep plans it where the option is not given (``cli_default`` is then its floor);
    workload: only the workload applies it (it builds its model or data from it): a sweep gives
    it, or varies it, only to a workload that declares it honours it (``protocol.honoured``).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown setting kind {kind!r}; valid: {', '.join(KINDS)}")
    metadata = {
        "planned": planned,
        "workload": workload,
        "flag": flag,
        "help": help,
        "kind": kind,
        "identity": identity,
        "swept": swept,
        "loop": loop,
        "cli_default": cli_default,
        "dest": dest,
        "minimum": minimum,
        "maximum": maximum,
        "added_later": added_later,
        "metavar": metavar,
        "choices": choices,
    }
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class CaseSettings:
    """What one case runs: the swept values of its group, and the sweep's fixed settings."""

    # -- swept: a sweep crosses these (benches.sweep.plan) ---------------------------------------
    strategy: str = setting(
        flag="--strategies",
        dest="strategies",
        swept=True,
        cli_default="all",
        help="all, or NAME[,NAME...]; a strategy with options is NAME:KEY=VALUE[:KEY=VALUE], "
        "e.g. native:set_to_none=false (default: all)",
    )
    options: str = setting("", flag=None, help="the strategy's options, k=v:k2=v2")
    accumulate: int = setting(
        flag="--accumulate",
        swept=True,
        minimum=1,
        help="K[,K...] micro-batches per window (default {default}; --quick: {quick})",
    )
    live_tensors: int = setting(
        flag="--live-tensors",
        swept=True,
        minimum=0,
        help="N[,N...] unrelated live tensors (default {default}; --quick: {quick})",
    )
    grad_sync: str = setting(
        "last",
        flag="--grad-sync",
        swept=True,
        loop=True,
        help="FLAVOUR[,FLAVOUR...] swept: when gradients are reduced across ranks, every "
        "micro-batch (every), the last only (last), or reduce-scattered every micro-batch and "
        "all-reduced at the last (scatter, hsdp) (default: last for none and ddp (ddp also "
        "runs every); fsdp2: every,last; hsdp: every,scatter,last)",
    )
    precision: str = setting(
        "fp32",
        flag="--precision",
        swept=True,
        loop=True,
        cli_default="fp32",
        choices=("fp32", "bf16-autocast", "bf16"),
        help="PRECISION[,PRECISION...] swept: fp32; bf16-autocast (fp32 weights and gradients, "
        "the forward under autocast); bf16 (bf16 weights, so bf16 .grad) (default: fp32)",
    )
    checkpointing: str = setting(
        "off",
        flag="--checkpointing",
        swept=True,
        loop=True,
        workload=True,
        cli_default="off",
        added_later=True,  # before it, no case checkpointed
        choices=("off", "on"),
        help="off|on[,...] swept: activation checkpointing, the workload's own (the reference "
        "transformer recomputes each layer's forward in the backward: torch.utils.checkpoint, "
        "non-reentrant); a workload that does not declare it is refused (default: off)",
    )
    # -- fixed for a sweep ---------------------------------------------------------------------
    workload: str = setting(
        DEFAULT_WORKLOAD,
        flag="--workload",
        cli_default=DEFAULT_WORKLOAD,
        help="MODULE:FACTORY, the workload every case runs (default: the reference "
        "transformer, {default}; the protocol: benches/workloads/protocol.py)",
    )
    preset: str = setting(
        flag="--preset",
        workload=True,
        help="tiny|small|base|big (default: tiny on CPU, base on CUDA)",
    )
    device: str = setting(flag="--device", cli_default="auto", help="auto|cpu|cuda (default: auto)")
    world_size: int = setting(
        1,
        flag="--world-size",
        kind="int",
        minimum=1,
        cli_default="1",
        help="run each case as N local ranks through torch.distributed.run",
    )
    parallel: str = setting(
        "none",
        flag="--parallel",
        help="none|ddp|fsdp2|hsdp: how ranks share the model (default: ddp with --world-size "
        "> 1, else none); ddp with --world-size 1 wraps one rank in DDP",
    )
    mesh: str = setting(
        "", flag="--mesh", help="hsdp's mesh, RxS replicas x shards (default: 2 x world-size/2)"
    )
    repeat: int = setting(
        10,
        flag="--repeat",
        kind="int",
        minimum=1,
        cli_default="8",  # with the control processes, the default sweep fits 15 min on 2 cores
        planned=True,
        help="measured pairs (strategy window + plain-loop window) per case (default {default}); "
        "not given, the processes a sweep adds run the pairs it plans from the costs and "
        "variances measured so far (between {default} and 8x that)",
    )
    warmup: int = setting(
        2,
        flag="--warmup",
        kind="int",
        minimum=0,
        cli_default="1",
        help="unmeasured pairs first (default {default})",
    )
    threads: int = setting(
        1,
        flag="--threads",
        help="torch threads of a case's process, all its ranks together (default: 1 per rank "
        "on CPU, pinned; on CUDA the cores of the machine that runs it over the processes it "
        "runs at once, a cluster's nodes' with --cluster)",
    )
    seed: int = setting(
        0,
        flag="--seed",
        kind="int",
        minimum=0,
        maximum=2**64 - 1,  # torch.manual_seed's range
        cli_default="0",
        help="seed of weights and data (default {default})",
    )
    optimizer: str = setting(
        "adamw",
        flag="--optimizer",
        loop=True,
        cli_default="adamw",
        choices=("adamw", "adamw-fused", "adamw-foreach", "sgd"),
        help="{choices}: the update's optimizer (default: {default})",
    )
    clip_norm: float | None = setting(
        None,
        flag="--clip-norm",
        loop=True,
        cli_default="none",
        help="clip each window's gradient to this total norm in the update (default: {default})",
    )
    compile: bool = setting(
        False,
        flag="--compile",
        kind="flag",
        loop=True,
        help="torch.compile the model once per case (compile time recorded, never in a window)",
    )
    compare_settings: str = setting(
        "",
        flag="--compare-settings",
        loop=True,
        cli_default="none",
        metavar="SETTING=VALUE",
        help="also run each case's strategy with SETTING=VALUE (one of {choices}) on a replica "
        "in the same process, window by window (ABBA): a paired ratio and verdict, e.g. "
        "compile=false with --compile",
    )
    pin: bool = setting(
        False,
        flag="--pin",
        kind="onoff",
        added_later=True,  # before --pin no case process was pinned
        help="pin each case process (each rank) to cores of its own with psutil's cpu_affinity "
        "(default: on with --threads 1 on Linux; --no-pin: off)",
    )
    base: str = setting(
        "",
        flag="--base",
        added_later=True,  # before --base every case ran the working tree's strategies only
        metavar="REF",
        help="also run every strategy as git commit REF has it (its strategies/, read from the "
        "repository, the working tree untouched), in the same processes: a verdict per "
        "strategy, working tree against REF, that the gate reads (e.g. HEAD, main)",
    )
    # -- fixed, not part of the identity: what is recorded beside the figures ------------------
    memray: bool = setting(
        False,
        flag="--memray",
        kind="flag",
        identity=False,
        help="memray's flamegraph of each case's memory pass",
    )
    keep_captures: bool = setting(
        False,
        flag="--keep-captures",
        kind="flag",
        identity=False,
        help="keep memray's capture files (by default only flamegraphs are kept)",
    )
    profile: bool = setting(
        False,
        flag="--profile",
        kind="flag",
        identity=False,
        help="torch.profiler: one window of each case's strategy and of the plain loop, after "
        "the timed pairs (off their clock): a trace per case in DIR/traces/ and the operators "
        "behind each phase, against the plain loop's, in the report",
    )
    plugins: list[str] = setting(  # noqa: RUF009 (a field with a default_factory, as field)
        flag="--plugin",
        kind="list",
        identity=False,
        dest="plugin",
        factory=list,
        help="import MODULE (it registers strategies); repeatable",
    )


SETTINGS = dataclasses.fields(CaseSettings)
FIELDS = {f.name: f for f in SETTINGS}
CASE_KEY = tuple(f.name for f in SETTINGS if f.metadata["identity"])
SWEPT = tuple(f.name for f in SETTINGS if f.metadata["swept"])
#: the settings only a workload applies: given only to one that declares it honours them
WORKLOAD = tuple(f.name for f in SETTINGS if f.metadata["workload"])
# the identity a sweep fixes: every case of a sweep has the same values
SWEEP_IDENTITY = tuple(n for n in CASE_KEY if n not in SWEPT and n != "options")
FIXED = tuple(f for f in SETTINGS if not f.metadata["swept"] and f.metadata["flag"])
#: the swept settings a sweep holds as lists of values, each read by its declaration
#: (``benches.sweep.arguments``); ``strategy`` is the sweep's ``strategies`` (labels)
AXES = tuple(f for f in SETTINGS if f.metadata["swept"] and f.name != "strategy")
LOOP = tuple(f.name for f in SETTINGS if f.metadata["loop"])  # the report's grouping key
#: a group of cases: one K, one N and one loop (every ``loop`` setting). Its strategies are
#: compared with each other, its noise between processes is pooled, an added round rotates its
#: strategies in one process: every place that forms a group reads it here (``group_of``)
GROUP = ("accumulate", "live_tensors", *LOOP)
#: the swept settings that change the loop: a report's tables show one value of each (``main``)
SWEPT_LOOP = tuple(n for n in LOOP if n in SWEPT)
# a swept setting is a group of its own per value, its value in every case id and identity: K
# and N by their own names (``GROUP``, ``CaseSpec.case_id``), any other as a loop setting. One
# declared swept without ``loop`` would pool its values' cases and share their ids: refused
# here, where it is declared, not found later by a sweep failing on two cases' one id
_UNGROUPED = [n for n in SWEPT if n not in ("strategy", *GROUP)]
if _UNGROUPED:
    raise TypeError(f"swept settings must be loop settings (loop=True): {', '.join(_UNGROUPED)}")
OPTION = {f.name: f.metadata["flag"] for f in SETTINGS if f.metadata["flag"]}  # for messages
OPTION["options"] = "--strategies NAME:OPTIONS"
#: a pooled case's settings (``Entry``): the identity a sweep fixes and its swept loop values
ENTRY_IDENTITY = (*SWEEP_IDENTITY, *SWEPT_LOOP)
# settings added after rows were written without them: what those rows ran
ADDED_LATER = {f.name: f.default for f in SETTINGS if f.metadata["added_later"]}


HINTS = typing.get_type_hints(CaseSettings)
_IDENTITY = tuple(f for f in SETTINGS if f.metadata["identity"])


def _checked(f: dataclasses.Field) -> Any:
    """A setting's type with its declared lower bound (msgspec checks it where a row is read;
    an upper bound past int64, the seed's, it cannot hold)."""
    low = f.metadata["minimum"]
    return Annotated[HINTS[f.name], Meta(ge=low)] if low is not None else HINTS[f.name]


# a results row's identity fields, in CASE_KEY's order (the row's first keys): UNSET where the
# file has none (``reports.judge.rows.read`` requires every one of an ok row)
RowIdentity = msgspec.defstruct(
    "RowIdentity",
    [(f.name, _checked(f) | None | UnsetType, UNSET) for f in _IDENTITY],
    kw_only=True,
    forbid_unknown_fields=True,
    gc=False,  # a row holds no cycle: the collector need not track its many records
    module=__name__,
)
# a pooled case's: the identity a sweep fixes and its swept loop values (its strategy, K and N
# are the case's own fields)
EntryIdentity = msgspec.defstruct(
    "EntryIdentity",
    [(f.name, HINTS[f.name]) for f in _IDENTITY if f.name in ENTRY_IDENTITY],
    kw_only=True,
    module=__name__,
)
# the sweep's fixed settings, identity or not, with the record's defaults
FixedSettings = dataclasses.make_dataclass(
    "FixedSettings",
    [
        (
            f.name,
            f.type,
            field(default_factory=f.default_factory, metadata=f.metadata)
            if f.default_factory is not dataclasses.MISSING
            else field(default=f.default, metadata=f.metadata),
        )
        for f in FIXED
    ],
    kw_only=True,
)
# a sweep's swept settings: each a list of values, its default the setting's (none: required)
SweptSettings = dataclasses.make_dataclass(
    "SweptSettings",
    [
        (
            f.name,
            f"list[{f.type}]",
            field(metadata=f.metadata)
            if f.default is dataclasses.MISSING
            else field(default_factory=lambda d=f.default: [d], metadata=f.metadata),
        )
        for f in AXES
    ],
    kw_only=True,
)
for _made in (FixedSettings, SweptSettings):
    _made.__module__ = __name__  # type hints resolve here


def check_value(name: str, value: Any) -> None:
    """A setting's value against its declaration (its choices, an integer's range): a
    ValueError naming the option, the bad value and the valid ones. The one check of a value,
    on the command line (``benches.sweep.arguments``) and where the engine builds its loop."""
    meta = FIELDS[name].metadata
    choices = meta["choices"]
    if choices is not None and value not in choices:
        raise ValueError(f"unknown {meta['flag']} {value!r}; valid: {', '.join(choices)}")
    low, high = meta["minimum"], meta["maximum"]
    number = isinstance(value, int) and not isinstance(value, bool)
    if number and ((low is not None and value < low) or (high is not None and value > high)):
        bounds = f">= {low}" if high is None else f"{low} to {high}"
        raise ValueError(f"{meta['flag']} {value} is out of range; valid: integers {bounds}")


def spell(value: Any) -> str:
    """A setting's value as the command line spells it: true, false, none, 1.0, adamw."""
    if isinstance(value, bool):
        return str(value).lower()
    return "none" if value is None else str(value)


def label(strategy: str, options: str) -> str:
    """``name`` or ``name:k=v:k2=v2``: how reports and verdicts.json name a strategy case."""
    return f"{strategy}:{options}" if options else strategy


def group_of(case: Any) -> tuple:
    """A case's group (``GROUP``'s values), of anything with the settings' names as attributes:
    the engine's ``CaseSpec``, a results ``Row``."""
    return tuple(getattr(case, name) for name in GROUP)


def group_of_record(k: int, n: int, case: Mapping[str, Any]) -> tuple:
    """The same group of a verdict record: its K, its N and its ``case`` (the loop settings)."""
    return (k, n, *(case[name] for name in LOOP))


def value_order(value: Any) -> tuple:
    """A sort key that orders values by their type: numbers by value (8 before 16, never as
    text), None first, tuples and lists element by element, the rest as text."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (2, str(value))
    if isinstance(value, int | float):
        return (1, value)
    if isinstance(value, tuple | list):
        return (3, tuple(value_order(v) for v in value))
    return (2, str(value))


def in_order(values: Iterable[Any]) -> list[Any]:
    """A setting's values in their order (``value_order``)."""
    return sorted(values, key=value_order)


def main_values(cases: Iterable[Any]) -> dict[str, Any]:
    """The value of each swept loop setting that a report's tables show: the setting's default
    where the cases ran it, else the first of their values (verdicts.json keeps every one)."""
    cases = list(cases)
    out = {}
    for f in SETTINGS:
        if f.name in SWEPT_LOOP:
            values = in_order({getattr(c, f.name) for c in cases})
            out[f.name] = f.default if f.default in values or not values else values[0]
    return out


def at_main(case: Any, main: Mapping[str, Any], *listed: str) -> bool:
    """Whether ``case`` (with the settings as attributes, or a verdict record's ``case``
    mapping) ran the main value (``main_values``) of every swept loop setting but ``listed``,
    the ones a table lists each value of: a table never mixes two values of another axis."""
    # a record written before a setting existed ran its default (``added_later``)
    if isinstance(case, Mapping):
        value = lambda name: case.get(name, FIELDS[name].default)  # noqa: E731
    else:
        value = lambda name: getattr(case, name)  # noqa: E731
    return all(value(name) == v for name, v in main.items() if name not in listed)


def off_default(case: Any, *but: str) -> list[tuple[str, str]]:
    """The swept loop settings (but ``but``) where ``case`` did not run the default, in the
    declaration's order: (name, the value spelled); a precision's name is left out ("")."""
    return [
        ("" if name == "precision" else name, spell(getattr(case, name)))
        for name in SWEPT_LOOP
        if name not in but and getattr(case, name) != FIELDS[name].default
    ]


def variant(case: Any, *but: str) -> str:
    """``off_default`` as a suffix of a strategy's name where a page keys cases by name:
    `` @bf16`` for a precision, `` @NAME=VALUE`` for another setting; "" at the defaults."""
    pairs = off_default(case, *but)
    return "".join(f" @{name}{'=' if name else ''}{value}" for name, value in pairs)


def id_part(case: Any) -> str:
    """``off_default`` as part of a case id (grad_sync aside: the id names it with
    ``parallel``): ``-bf16`` for a precision, ``-NAME-VALUE`` for another; "" at the defaults."""
    pairs = off_default(case, "grad_sync")
    return "".join(f"-{name}-{value}" if name else f"-{value}" for name, value in pairs)


def is_base(name: str) -> bool:
    """Whether a strategy (``name`` or ``name:k=v``) is the base build's twin of another."""
    return name.partition(":")[0].endswith(BASE)


def head_of(name: str) -> str:
    """The working tree's strategy of a base twin: ``block:k=v`` for ``block@base:k=v``."""
    label, colon, options = name.partition(":")
    return label.removesuffix(BASE) + colon + options


def base_of(name: str) -> str:
    """The base build's twin of a strategy: ``block@base:k=v`` for ``block:k=v``."""
    label, colon, options = name.partition(":")
    return label + BASE + colon + options


def twins(a: str, b: str) -> bool:
    """Whether ``b`` is the base build's twin of ``a``."""
    return is_base(b) and head_of(b) == a


def case_key(case: Any) -> tuple:
    """A case's identity, of a ``Row`` or of the engine's ``CaseSpec`` (the same names)."""
    return tuple(getattr(case, k) for k in CASE_KEY)
