"""Several strategies in one process: each on a replica of its own, rotated with the plain loop.

A case's process pairs one strategy with the plain loop (``runner.PairedRunner``). Here one
process holds the plain loop and several strategies' loops, every replica with the same weights,
and runs them round by round on the same data: every loop one window per round, in an order that
runs forwards, then backwards, then rotates by one place, so each loop meets each position
(and each neighbour on both sides) equally often. A strategy's figure per round
is its window over the plain loop's window of the same round, as in a pair.

What this buys: two strategies measured in one process share whatever that process does to
all of its loops (its cores, its heap, the plain loop's own offset), so strategy against
strategy can be read from one process's figures, paired process by process. Whether that
shrinks the spread between processes is measured (``python -m benches spread``), not assumed.
``global`` searches every live tensor of its process, so it never shares one: the other
replicas' gradients would be its work.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

from benches.engine import memory, process, warmup
from benches.engine.envinfo import psi_cpu
from benches.engine.growth import GROWTH_WINDOWS, footprint_bytes
from benches.engine.replicas import fresh_replica
from benches.engine.runner import PHASES, Loop

PLAIN = "plain"  # the plain loop's name among the rotated loops


def rotation(names: Sequence[str], index: int) -> list[str]:
    """Round ``index``'s order: ``names`` rotated by ``index // 2`` places, backwards on odd
    rounds (each pair of rounds runs one order forwards, then backwards: over 2 x len(names)
    rounds every name takes every position twice, once each way)."""
    shift = (index // 2) % len(names)
    order = list(names[shift:]) + list(names[:shift])
    return order[::-1] if index % 2 else order


class RotatedRunner:
    """The plain loop and ``labels``' loops, each on a replica with the workload's weights.

    ``build_seed`` shuffles the order in which the replicas are built (None: the plain loop
    first, then ``labels`` in order), so that what being built first or last does to a replica
    is spread over the loops instead of always landing on the same one.
    """

    def __init__(
        self,
        workload,
        labels: Sequence[str],
        parallel=None,
        grad_sync: str = "last",
        build_seed: int | None = None,
    ) -> None:
        if PLAIN in labels or len(set(labels)) != len(labels):
            raise ValueError(f"strategies to rotate must be distinct and not {PLAIN!r}: {labels}")
        self.names = [PLAIN, *labels]
        self.build_order = list(self.names)
        if build_seed is not None:
            random.Random(build_seed).shuffle(self.build_order)
        self.loops: dict[str, Loop] = {}
        for name in self.build_order:
            model = fresh_replica(workload.model, parallel)
            strategy = None if name == PLAIN else name
            self.loops[name] = Loop(workload, model, strategy, parallel, grad_sync)

    def round(self, index: int, batches, tokens: float) -> dict[str, dict[str, float]]:
        """Every loop's window on the same data, in ``rotation`` order: its phases' seconds."""
        return {
            name: self.loops[name].window(batches, tokens) for name in rotation(self.names, index)
        }

    def drop(self, label: str) -> None:
        """``label``'s loop out of the rotation (its check failed), its replica freed."""
        self.loops.pop(label).close()
        self.names.remove(label)

    def close(self) -> None:
        for loop in self.loops.values():
            loop.close()


TURNS = 2  # full turns of the rotation a process runs, at the least (its deadline permitting)
AFTER_ROUNDS = GROWTH_WINDOWS  # what ``after`` runs, in rounds' time: each loop's growth alone


def timed_rounds(repeat: int, loops: int) -> int:
    """How many timed rounds a rotated process runs: whole turns of its rotation (2 x loops
    rounds each: every loop in every place, both ways), ``TURNS`` at least, and at least
    ``repeat`` rounds.
    Inside one process a strategy against another varied only by its rounds' noise (tiny, K=1:
    SD 1.35% with 12 rounds, 0.72% with 36, as 1/sqrt(rounds) predicts), so rounds there are
    as good as processes and far cheaper: ``python -m benches spread --rounds R``."""
    turn = 2 * loops
    return turn * max(TURNS, -(-repeat // turn))  # whole turns only


LEAST_ROUNDS = 2  # a round forwards and one backwards: every loop's place evened out once


def fitting_rounds(planned: int, loops: int, round_s: float, left_s: float) -> int:
    """The timed rounds a process runs before its deadline: ``planned``, or as many whole turns
    as ``left_s`` holds at ``round_s`` a round; less than a turn, as many pairs of rounds (one
    forwards, one backwards) as it holds, ``LEAST_ROUNDS`` at the least (a process that started
    measures: a turn of seven loops on the small preset is 200 s here)."""
    turn = 2 * loops
    if round_s <= 0:
        return planned
    fit = int(left_s // (round_s * turn)) * turn
    if not fit:
        fit = int(left_s // (round_s * LEAST_ROUNDS)) * LEAST_ROUNDS
    return min(planned, max(LEAST_ROUNDS, fit))


def warm_rounds(spec, runner: RotatedRunner, timed, planned: int, before=()) -> list[float]:
    """Warm-up rounds until steady (``engine.warmup``: ``before`` first; a time-only process
    ``spec.warm_pairs`` untested), capped at a share of the ``planned`` rounds, or of what the
    time to ``spec.deadline`` holds; every round's seconds."""

    def warm_round(i: int) -> float:
        return sum(w["window"] for w in runner.round(i, *timed[i % 2]).values())

    def timing(warmed: list[float]) -> int:  # the rounds it will time: what the time left holds
        if not (spec.deadline and warmed):
            return planned
        return fitting_rounds(planned, len(runner.names), warmed[-1], spec.deadline - time.time())

    return warmup.warm_up(
        warm_round, spec.warmup, timed=timing, before=before, learned=spec.warm_pairs
    )


def rotated_rounds(
    spec, runner: RotatedRunner, workload, timed, lap=None, after=None, before=()
) -> dict[str, Any]:
    """A process of several strategies (``spec.rotation``, ``runner``'s loops): warm-up rounds
    until steady (``engine.warmup``: ``before``, the rounds' worth of windows the loops ran
    already, count; a time-only process runs ``spec.warm_pairs`` untested), then
    ``timed_rounds`` timed ones (fewer where ``spec.deadline`` comes first:
    ``fitting_rounds``), each strategy's windows with the plain loop's of the same round as its
    pairs. Per strategy the samples a case's timed pairs give (every phase, ``plain_window``,
    ``plain_reset``, ``cpu_pressure``, ``warmup``); the process's psutil figures and resident set
    (``rss``: after the warm-up, its peak over the rounds); where ``after`` is given, the
    process's memory before the first timed round and after each (``footprints``,
    ``growth.footprint_bytes``, off the clock) and what ``after(runner, footprints)`` returns,
    called after the timed rounds (with a deadline, such a process times ``AFTER_ROUNDS`` rounds
    at the least; what ``after`` runs, where the process grew, runs past the deadline).
    ``lap(step)`` (the case's ``Wall``) is told when the rounds are warm and when the timed
    rounds end. The caller closes ``runner``."""
    planned = timed_rounds(spec.pairs_planned, len(runner.names))
    warmed = warm_rounds(spec, runner, timed, planned, before)
    if lap is not None:
        lap("warmup")
    phases = (*PHASES, "plain_window", "plain_reset", "cpu_pressure")
    samples = {
        label: {**{phase: [] for phase in phases}, "warmup": list(warmed)}
        for label in spec.rotation
    }
    rss_after_setup = process.rss_bytes()
    hwm_reset = memory.reset_peak_rss()
    figures = process.TimedPairsProcess()
    rounds = planned
    if spec.deadline:  # the sweep's budget: whole turns until then
        round_s = statistics.median(warmed[-3:]) if warmed else 0.0
        left = spec.deadline - time.time()
        rounds = fitting_rounds(rounds, len(runner.names), round_s, left)
        if after is not None:
            # the growth is read around the timed rounds (``growth.quiet``): enough of them
            # to judge, and no loop's windows alone unless the process grows (then those
            # windows, ``AFTER_ROUNDS`` rounds' time, run past the deadline)
            rounds = max(rounds, AFTER_ROUNDS)
    # the process's footprint before the timed rounds and after each, off the clock: where
    # the rounds keep nothing, no loop's windows need running alone (``growth.quiet``)
    footprints = [footprint_bytes(workload.device)] if after is not None else []
    figures.start()
    for i in range(rounds):
        # the data changes every two rounds, so each direction of the rotation meets both
        stall, start = psi_cpu("total"), time.perf_counter()
        windows = runner.round(len(warmed) + i, *timed[(i // 2) % 2])
        wall, stalled = time.perf_counter() - start, psi_cpu("total")
        pressure = (stalled - stall) / 1e6 / wall if None not in (stall, stalled) else None
        for label in spec.rotation:
            for phase, seconds in windows[label].items():
                samples[label][phase].append(seconds)
            samples[label]["plain_window"].append(windows[PLAIN]["window"])
            samples[label]["plain_reset"].append(windows[PLAIN]["reset"])
            samples[label]["cpu_pressure"].append(pressure)
        if after is not None:
            footprints.append(footprint_bytes(workload.device))
        figures.sample()
    if lap is not None:
        lap("timed_pairs")
    rss = {
        "rss_after_setup_bytes": rss_after_setup,
        "peak_rss_bytes": memory.status_bytes("VmHWM") if hwm_reset else None,
        "peak_rss_is_since_setup": hwm_reset,
    }
    return {
        "rss": rss,
        "samples": samples,
        "process": figures.figures(),
        "pairs_stamps": figures.stamps,
        "build_order": runner.build_order,
        "footprints": footprints,
        "after": after(runner, footprints) if after is not None else None,
    }
