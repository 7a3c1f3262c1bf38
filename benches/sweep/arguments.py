"""The sweep's arguments: the options (``options``, the parser) checked one by one and against
each other into a ``Sweep`` (``record``). Every problem is a one-line ``UsageError`` (exit 2)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import re
import shutil
from pathlib import Path
from typing import Any

from benches.engine import frameworks, training
from benches.engine.builds import folder
from benches.engine.spec import OPTION, SWEEP_IDENTITY, parse_options
from benches.sweep.machine import (
    builds_here,
    case_timeout,
    check_gpus,
    check_workload,
    default_threads,
    device_and_preset,
    find_workload,
    honours,
    pinning,
    preset_of,
)
from benches.sweep.options import AXIS_DEFAULTS, DEFAULT_BUDGET, QUICK
from benches.sweep.outdir import UsageError, output_dir
from benches.sweep.record import MAX_LOOKS, Sweep
from benches.sweep.values import fraction, int_list, int_value, seconds, threads_per_rank
from benches.workloads import protocol
from reports.judge.rows import spell
from reports.schema.records import RecordError, RunFile
from reports.schema.settings import AXES, FIXED, SETTINGS, check_value

BASELINE_GONE = "baseline"


EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b")


# -- validation -----------------------------------------------------------------------------------
def rounds_and_budget(args: argparse.Namespace) -> tuple[int, float]:
    """--rounds R (exactly R, no budget) or --budget SECONDS (rounds added until decided)."""
    rounds = int_value("--rounds", args.rounds, 1) if args.rounds is not None else 1
    default = float(QUICK["budget"]) if getattr(args, "quick", False) else DEFAULT_BUDGET
    budget = seconds("--budget", args.budget, default)
    if args.rounds is not None and args.budget is not None and budget > 0:
        raise UsageError(
            "--budget adds rounds until the verdicts are decided, --rounds R runs exactly R: "
            "give one of them"
        )
    return rounds, 0.0 if args.rounds is not None else budget


def control_of(args: argparse.Namespace, names: list[str]) -> str:
    """The strategy run in extra processes to measure the noise (--control), or none."""
    control = args.control if args.control is not None else control_strategy(names)
    if control != "none" and control not in names:
        raise UsageError(f"--control {control!r} is not swept; valid: none, {', '.join(names)}")
    return control


def setting_value(args: argparse.Namespace, f: dataclasses.Field) -> Any:
    """A fixed setting's value from its option, read as its kind says (``settings.KINDS``):
    the one generic reading; the settings that depend on others are worked out in ``resolve``."""
    meta = f.metadata
    given = getattr(args, meta["dest"] or f.name, None)
    if given is None:
        given = meta["cli_default"]
    if meta["kind"] == "int":
        return int_value(meta["flag"], given, meta["minimum"], meta["maximum"])
    if meta["kind"] in ("flag", "onoff"):
        return None if given is None else bool(given)
    if meta["kind"] == "list":
        return list(given or [])
    if given is not None:
        checked(f.name, given)
    return given


def checked(name: str, value: Any) -> Any:
    """``value`` checked against its setting's declaration (``settings.check_value``)."""
    try:
        check_value(name, value)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return value


def axis_values(args: argparse.Namespace, f: dataclasses.Field) -> list[Any]:
    """A swept setting's values (``V[,V...]``) as given, else its default (--quick's, the
    sweep's, the declaration's), each read by its type and checked by its declaration; in the
    order given, without repeats."""
    meta = f.metadata
    default = AXIS_DEFAULTS.get(f.name) or meta["cli_default"] or f.default
    text = swept(args, meta["dest"] or f.name, default)
    if f.type == "int":
        return [checked(f.name, v) for v in int_list(meta["flag"], text, meta["minimum"] or 0)]
    items = [item.strip() for item in str(text).split(",")]
    if not all(items):
        raise UsageError(f"{meta['flag']} {text!r} has an empty item; valid: V[,V...]")
    return list(dict.fromkeys(checked(f.name, item) for item in items))


def resolve(args: argparse.Namespace, nodes: list[dict[str, Any]] | None = None) -> Sweep:
    """Arguments -> a validated sweep; every problem is a one-line UsageError. Every fixed
    setting is read by its kind (``setting_value``); those that depend on others or on the
    machine are worked out below.

    The machine is the one that runs the processes, never the one the command was typed on
    where they differ: with ``--cluster`` and no ``nodes`` (the cluster not joined yet) every
    option is checked, but the device (``auto``), the preset's default, the threads, the
    pinning, the workload's check and ``--resume``'s checks wait for the nodes; the sweep
    joins the cluster and resolves again with its ``nodes`` (``benches.sweep.cli``), where
    they are decided from the nodes (``benches.sweep.cluster.place``)."""
    not_empty(args)
    cluster = getattr(args, "cluster", None)
    waiting = bool(cluster) and nodes is None  # the nodes decide; not joined yet
    fixed = {f.name: setting_value(args, f) for f in FIXED}
    world_size = fixed["world_size"]
    device, preset = device_and_preset(args, here=not cluster)
    if cluster and not waiting:
        from benches.sweep.cluster import resources

        device = resources.device_of(args.device, nodes)
        preset = preset_of(args, device)
    names = strategy_names(args)
    recipe = recipe_settings(args)
    # every swept setting by its declaration; grad_sync's default depends on --parallel
    axes = {f.name: axis_values(args, f) for f in AXES if f.name != "grad_sync"}
    rounds, budget = rounds_and_budget(args)
    parallel, mesh, axes["grad_sync"] = parallel_settings(args, world_size)
    framework_settings(names, parallel, recipe)
    where = cluster_settings(args, joined=nodes is not None)
    threads = int_value("--threads", args.threads, 1) if args.threads else None
    if threads is None and cluster and not waiting:
        threads = resources.threads_of(nodes, device, world_size, where["per_node"])
    if threads is None:
        threads = world_size if waiting else default_threads(device, world_size)
    # a cluster's pinning is decided from its nodes' hosts (below), never this machine's cores
    pin = bool(args.pin) if cluster else pinning(args.pin, threads, world_size)
    min_effect = fraction("--min-effect", args.min_effect)
    control = control_of(args, names)
    if not cluster:  # a cluster's nodes' GPUs are checked when joined
        check_gpus(device, world_size)
    workload = protocol.canonical(fixed["workload"])
    if workload != protocol.DEFAULT and not waiting:
        if builds_here(device):
            check_workload(workload, device, preset, axes["accumulate"][0], fixed["seed"])
        else:  # the GPUs are the nodes' only: its factory found here, built where it runs
            find_workload(workload)
    honours(args, workload)  # what it applies, once it is known to load and run
    pairs = (fixed["repeat"], fixed["warmup"])
    timeout = case_timeout(args, device, preset, pairs, parallel, {**recipe, **axes})
    out = output_dir(args)
    base_missing: list[str] = []
    fixed["base"] = fixed["base"] or ""  # not given: the working tree alone
    created = None  # what --base wrote into --out: removed again if a later check refuses
    if fixed["base"] and not waiting:
        from benches.sweep import base

        created = base.made(folder(out, base.commit_of(fixed["base"])))
        fixed["base"], names, base_missing = base.for_sweep(fixed["base"], out, names, cluster)
    try:
        fixed.update(
            preset=preset,
            device=device,
            threads=threads,
            pin=pin,
            workload=workload,
            parallel=parallel,
            mesh=mesh,
            **recipe,
        )
        sweep = Sweep(
            **fixed,
            **axes,
            strategies=names,
            rounds=rounds,
            budget=budget,
            looks=MAX_LOOKS if budget > 0 else 1,
            plan_pairs=getattr(args, "repeat", None) is None,
            rotate=not getattr(args, "no_rotate", False),
            timeout=timeout,
            resume=args.resume,
            out=out,
            min_effect=min_effect,
            control=control,
            quick=getattr(args, "quick", False),
            base_missing=base_missing,
            **where,
        )
        if cluster and not waiting:
            sweep.pin = resources.pinning_of(args.pin, nodes, sweep)
        if args.resume and args.pin is None and not waiting:  # the run's own pinning (unpinned
            sweep.pin = resumed_pin(out, sweep.pin)  # from before --pin)
        if args.resume and not waiting:
            same_settings(sweep)
        return sweep
    except BaseException:  # refused after --base wrote its build: nothing stays written
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise


def cluster_settings(args: argparse.Namespace, joined: bool = False) -> dict[str, Any]:
    """--cluster, --per-node and --exclusive, checked as far as this machine can: the address
    is probed (unless ``joined``: the sweep is connected already) and the cluster's resources
    checked when it is joined (``benches.sweep.cluster``)."""
    cluster = getattr(args, "cluster", None)
    per_node = getattr(args, "per_node", None)
    exclusive = bool(getattr(args, "exclusive", False))
    if cluster is None:
        for flag, given in (("--per-node", per_node is not None), ("--exclusive", exclusive)):
            if given:
                raise UsageError(f"{flag} needs --cluster ADDRESS; valid: local, auto, HOST:PORT")
        return {}
    from benches.sweep.cluster import address

    if not joined:
        address.check(cluster)
    if per_node is not None:
        per_node = int_value("--per-node", per_node, 1)
        if exclusive and per_node != 1:
            raise UsageError(f"--exclusive runs 1 process per node; --per-node {per_node} too")
    return {"cluster": cluster, "per_node": 1 if exclusive else per_node, "exclusive": exclusive}


def swept(args: argparse.Namespace, name: str, default: str) -> str:
    """An axis's values as given, else --quick's default, else the sweep's."""
    given = getattr(args, name)
    if given is not None:
        return given
    # an axis --quick does not set (one added after it) keeps the sweep's default
    return QUICK.get(name, default) if getattr(args, "quick", False) else default


# options whose empty value would silently become the default: refused where they are parsed
# (every setting that takes a value, from its declaration, and the sweep's own)
GIVEN = {
    **{
        f.metadata["dest"] or f.name: f.metadata["flag"]
        for f in SETTINGS
        if f.metadata["flag"] and f.metadata["kind"] in ("text", "int")
    },
    **{
        name: "--" + name.replace("_", "-")
        for name in ("out", "control", "rounds", "budget", "timeout", "min_effect", "frameworks")
    },
}


def not_empty(args: argparse.Namespace) -> None:
    """An option given an empty value (``--preset ''``) is a usage error, not its default."""
    for dest, flag in GIVEN.items():
        value = getattr(args, dest, None)
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"{flag} {value!r} is empty; give a value, or leave {flag} out")
    for module in getattr(args, "plugin", []):
        if not module.strip():
            raise UsageError(f"--plugin {module!r} is empty; give a module name")


def strategy_names(args: argparse.Namespace) -> list[str]:
    """--plugin modules imported, then --strategies as case labels (``all``: every registered
    strategy that can run the sweep's --parallel)."""
    for module in args.plugin:
        try:
            importlib.import_module(module)
        except SystemExit as err:  # a plugin's sys.exit is its failure, not the sweep's exit
            raise UsageError(
                f"--plugin {module!r} called sys.exit({err.code!r}) on import"
            ) from None
        except Exception as err:
            raise UsageError(f"--plugin {module!r} failed to import: {err}") from None
    import strategies

    known = strategies.available()
    items = [n.strip() for n in args.strategies.split(",")]
    if items == ["all"]:
        names = [n for n in known if runs_under(n, parallel_mode(args))]
    elif "all" in items:
        raise UsageError(
            f"--strategies {args.strategies!r}: 'all' cannot be combined with names; give all, "
            f"or names from: {', '.join(known)}"
        )
    else:
        names = [strategy_label(n.strip(), known) for n in args.strategies.split(",")]
    listed = getattr(args, "frameworks", None)
    if listed is not None:  # by --strategies' rules: an empty item is refused, never dropped
        items = [n.strip() for n in listed.split(",")]
        if "" in items:
            raise UsageError(
                f"--frameworks {listed!r} has an empty item; valid: PATH[,PATH...] from "
                f"{', '.join(frameworks.PATHS)}"
            )
        names += [framework_label(n, "--frameworks") for n in items]
    return list(dict.fromkeys(names))


def canonical_label(name: str, parsed: dict[str, Any]) -> str:
    """``name`` or ``name:k=v:k2=v2``: options sorted by key, values as parsed (true, none, 1.0)."""
    canonical = ":".join(f"{k}={spell(v)}" for k, v in sorted(parsed.items()))
    return f"{name}:{canonical}" if canonical else name


def framework_settings(names: list[str], parallel: str, recipe: dict[str, Any]) -> None:
    """The settings a framework's path cannot run with: a UsageError naming the setting."""
    paths = [n for n in names if frameworks.name_of(n)]
    if not paths:
        return
    if parallel not in ("none", "ddp"):
        raise UsageError(
            f"--frameworks {paths[0]!r} with --parallel {parallel}: a path runs the "
            "framework's own data parallelism (Accelerate drives FSDP2 on a GPU only, and on a "
            "CPU falls back to DDP); valid: --parallel ddp or none"
        )
    if recipe.get("clip_norm") is not None:
        raise UsageError(
            f"--frameworks {paths[0]!r} with --clip-norm: a path's clipping is not measured "
            "yet; valid: no --clip-norm"
        )
    if recipe.get("compare_settings"):
        raise UsageError(
            f"--frameworks {paths[0]!r} with --compare-settings: valid: no --compare-settings"
        )
    if recipe.get("compile"):
        raise UsageError(
            f"--frameworks {paths[0]!r} with --compile: a framework compiles its own way "
            "(Accelerate's dynamo plugin, DeepSpeed's engine.compile), not measured yet; "
            "valid: no --compile"
        )


def framework_label(text: str, flag: str) -> str:
    """A framework's path (``engine.frameworks``) as its case label: the framework known and
    installed, its options valid; options canonical, as a strategy's."""
    name, _, options = text.partition(":")
    if name not in frameworks.PATHS:
        raise UsageError(
            f"{flag} {text!r}: unknown framework; valid: {', '.join(frameworks.PATHS)}"
        )
    try:  # its options first: their valid values do not depend on the package
        parsed = parse_options(options)
        frameworks.check(name, parsed)
    except ValueError as err:
        raise UsageError(f"{flag} {text!r}: {err}") from None
    if not frameworks.installed(name):
        raise UsageError(f"{flag} {text!r}: {name} is not installed; {frameworks.EXTRA}")
    return canonical_label(name, parsed)


def parallel_mode(args: argparse.Namespace) -> str:
    """--parallel as given or as its default (before it is checked): ddp with ranks, else none."""
    world = args.world_size if str(args.world_size).isdigit() else "1"
    return args.parallel or ("ddp" if int(world) > 1 else "none")


def runs_under(name: str, parallel: str) -> bool:
    """Whether strategy ``name`` says it can run with ``parallel`` (``Strategy.runs_under``)."""
    import strategies

    try:
        return parallel in getattr(strategies.get(name), "runs_under", (parallel,))
    except (Exception, SystemExit):  # a plugin that cannot be made without options: its case
        return True  # says why


def strategy_label(text: str, known: list[str]) -> str:
    """``NAME`` or ``NAME:KEY=VALUE[:KEY=VALUE]`` checked (the strategy made once with those
    options); options canonical: sorted by key, values as parsed (true, false, none, numbers)."""
    import strategies

    name, _, options = text.partition(":")
    if name in frameworks.PATHS:  # a case by hand of a framework's path
        return framework_label(text, "--strategy")
    if name == BASELINE_GONE:
        raise UsageError(
            "strategy 'baseline' is gone: every case now runs the plain loop beside its "
            f"strategy (overhead); valid strategies: all, {', '.join(known)}"
        )
    if name not in known:
        raise UsageError(f"unknown strategy {name!r}; valid strategies: all, {', '.join(known)}")
    if not options:
        return name
    try:
        parsed = parse_options(options)
        strategies.get(name, **parsed)
    except SystemExit as err:  # a plugin's sys.exit is its failure, not the sweep's exit
        raise UsageError(f"--strategies {text!r}: called sys.exit({err.code!r})") from None
    except Exception as err:  # unknown option, or a value the strategy refuses
        raise UsageError(f"--strategies {text!r}: {err}".replace("\n", " ")) from None
    return canonical_label(name, parsed)


def recipe_settings(args: argparse.Namespace) -> dict[str, Any]:
    """--clip-norm, --compile and --compare-settings: what their declarations cannot check
    (the swept --precision and the declared --optimizer are read by ``axis_values`` and
    ``setting_value``)."""
    clip_norm = None
    if str(args.clip_norm).lower() != "none":
        try:
            clip_norm = float(args.clip_norm)
        except ValueError:
            clip_norm = -1.0
        if not clip_norm > 0 or clip_norm == float("inf"):
            raise UsageError(
                f"--clip-norm {args.clip_norm!r} is invalid; valid: a number > 0, or none"
            )
    compare = "" if str(args.compare_settings).lower() == "none" else args.compare_settings
    if compare:
        try:
            setting, value = training.parse_setting(compare)
        except ValueError as err:
            raise UsageError(str(err)) from None
        compare = f"{setting}={spell(value)}"
    return {
        "clip_norm": clip_norm,
        "compile": bool(args.compile),
        "compare_settings": compare,
    }


def parallel_settings(args: argparse.Namespace, world_size: int) -> tuple[str, str, list[str]]:
    """--parallel, --mesh and --grad-sync, checked against each other and --world-size."""
    from benches.engine.distributed import GRAD_SYNC, PARALLEL, parse_mesh

    parallel = parallel_mode(args)
    if parallel not in PARALLEL:
        raise UsageError(f"unknown --parallel {parallel!r}; valid: {', '.join(PARALLEL)}")
    if parallel == "none" and world_size > 1:
        raise UsageError(
            f"--parallel none cannot run --world-size {world_size}; valid: ddp, fsdp2, hsdp"
        )
    try:
        shape = parse_mesh(args.mesh, parallel, world_size)
    except ValueError as err:
        raise UsageError(str(err)) from None
    mesh = "x".join(map(str, shape)) if parallel == "hsdp" else ""
    valid = GRAD_SYNC[parallel]
    if args.grad_sync is None:
        return parallel, mesh, list(valid) if parallel in ("fsdp2", "hsdp") else ["last"]
    flavours = [item.strip() for item in str(args.grad_sync).split(",")]
    for item in flavours:
        if item not in valid:
            raise UsageError(
                f"--grad-sync {item!r} cannot run with --parallel {parallel}; "
                f"valid: {', '.join(valid)}"
            )
    return parallel, mesh, list(dict.fromkeys(flavours))


def control_strategy(names: list[str]) -> str:
    """The strategy run in a second process when every case has one: PyTorch's own if swept."""
    return "native" if "native" in names else names[0]


def resumed_pin(out: Path, default: bool) -> bool:
    """The pinning a run being resumed recorded: a run from before --pin was unpinned."""
    try:
        run = RunFile.read(out)
    except RecordError:
        return default
    return bool(run.case_settings.get("pin", False)) if run else default


def case_settings(sweep: Sweep) -> dict[str, Any]:
    """The sweep's settings that are part of every case's identity."""
    return {
        name: threads_per_rank(sweep.threads, sweep.world_size)
        if name == "threads"
        else getattr(sweep, name)
        for name in SWEEP_IDENTITY
    }


SWEEP_OPTION = {"min_effect": "--min-effect", "per_node": "--per-node", "exclusive": "--exclusive"}


def same_settings(sweep: Sweep) -> None:
    """--resume with other settings than the run's would mix cases: a usage error naming one."""
    try:
        run = RunFile.read(sweep.out)
    except RecordError:
        return
    if run is None:
        return
    recorded = {**run.case_settings}
    # the sweep's own that change its figures (--cluster may change: where is not what)
    for name in ("min_effect", "per_node", "exclusive"):
        recorded[name] = run.sweep.get(name, getattr(Sweep, name))
    mine = {
        **case_settings(sweep),
        **{name: getattr(sweep, name) for name in ("min_effect", "per_node", "exclusive")},
    }
    for name, value in recorded.items():
        if name in mine and value != mine[name]:
            raise UsageError(
                f"--resume: {SWEEP_OPTION.get(name) or OPTION[name]} "
                f"{spell(mine[name]) or '(none)'} differs from the "
                f"run's {spell(value) or '(none)'} in {str(sweep.out)!r}; resume with the same "
                "settings, or use a new --out"
            )
