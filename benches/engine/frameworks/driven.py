"""A framework that owns its training loop (the transformers and Lightning Trainers), driven
window by window: its ``fit``/``train`` runs in a thread of its own and takes its micro-batches
from a loader that hands it one window at a time, while the case's thread waits. The
framework's callbacks mark the phases on the case's clock, and pause before the optimizer step
when the gradient check reads the gradients. So a Trainer's windows still alternate with the
plain loop's, in the same process on the same data (ABBA), and only one of the two threads
runs at any moment: while a window of the plain loop runs, the Trainer's thread is blocked in
its loader.

``Driven`` is the case's side; a framework's module subclasses it with ``start`` (make the
Trainer and call ``train``/``fit`` on a ``Feed``) and calls ``on_forward``,
``on_backward``, ``before_step`` and ``after_reset`` from its callbacks.
"""

from __future__ import annotations

import queue
import threading

import torch

from benches.engine.frameworks import Base

STOP = object()  # closing: the loader or a paused callback raises Stopped
GO = object()  # a paused window's step may go on


class Stopped(Exception):
    """Raised inside the framework's loop when the case closes the path: its thread ends."""


class Window:
    """The window the framework runs now: its loss, its micro-batches, the case's marks."""

    def __init__(self, loss_of, batches, mark, update: bool) -> None:
        self.loss_of, self.batches, self.mark, self.update = loss_of, batches, mark, update
        self.forwards = self.backwards = 0


class Later:
    """A micro-batch of the window to come, by its index (``Driven.lazy_loader``)."""

    def __init__(self, index: int) -> None:
        self.index = index


class Driven(Base):
    def __init__(self, model: torch.nn.Module, optimizer, k: int) -> None:
        self.model, self.given_optimizer, self.k = model, optimizer, k
        self.to_framework: queue.Queue = queue.Queue()
        self.to_case: queue.Queue = queue.Queue()
        self.current: Window | None = None
        device = torch.cuda.current_device() if torch.cuda.is_available() else None
        self.threads = torch.get_num_threads()  # the case's: its loop's thread runs with them
        self.thread = threading.Thread(target=self._run, args=(device, self.threads), daemon=True)
        self.thread.start()
        self._wait("idle")  # the framework has wrapped the model and asks for its first window

    # --- the framework's thread ---

    def start(self) -> None:
        """Make the framework's trainer on ``self.model`` with ``self.given_optimizer`` and run
        it on a ``Feed(self)``; set ``self.module`` and ``self.optimizer`` before the feed's
        first item."""
        raise NotImplementedError

    def on_feed(self) -> None:
        """The framework asks for its data: its model is wrapped, its optimizer made."""

    def _run(self, device: int | None, threads: int) -> None:
        # a thread starts with the process's defaults: on device 0, and with as many intra-op
        # threads as cores (OpenMP's setting is per thread), not the case's
        torch.set_num_threads(threads)
        if device is not None:
            torch.cuda.set_device(device)
        try:
            self.start()
            self.to_case.put(Stopped("the framework's loop ended before the case closed it"))
        except Stopped:
            pass
        except BaseException as err:  # the case's thread raises it
            self.to_case.put(err)

    def loader(self):
        """The framework's training data: each window's micro-batches as ``{"batch": b}``, a
        window at a time (the transformers Trainer fetches a step's K at once)."""
        while True:
            for batch in self._next_window().batches:
                yield {"batch": batch}

    def lazy_loader(self):
        """The same for a framework that fetches one micro-batch ahead (Lightning): items that
        name a micro-batch of the window to come, resolved when its step asks for it (``loss``),
        so that the fetch ahead never waits for a window the case has not handed over."""
        while True:
            yield from (Later(i) for i in range(self.k))

    def _next_window(self) -> Window:
        """The next window, waited for; asking for it tells the case the last one is done (the
        framework's thread blocks here)."""
        self.to_case.put("idle")
        item = self.to_framework.get()
        if item is STOP:
            raise Stopped
        self.current = item
        return item

    def loss(self, inputs) -> torch.Tensor:
        """A micro-batch's loss through the framework's module, the workload's own."""
        if isinstance(inputs, Later):
            window = self._next_window() if inputs.index == 0 else self.current
            batch = window.batches[inputs.index]
        else:
            batch = inputs["batch"]
        return self.current.loss_of(batch)

    def on_forward(self) -> None:
        window = self.current
        window.forwards += 1
        window.mark(f"forward {window.forwards}")

    def on_backward(self) -> None:
        window = self.current
        window.backwards += 1
        window.mark(f"backward {window.backwards}")

    def before_step(self) -> None:
        """After the K-th backward, before the optimizer's step: the update phase begins; a
        window run without its update pauses here while the case reads the gradients."""
        window = self.current
        window.mark("update")
        if not window.update:
            window.mark = _unmarked  # the step after the pause is not timed
            self.to_case.put("paused")
            if self.to_framework.get() is STOP:
                raise Stopped

    def after_reset(self) -> None:
        """After the step and the reset: the window's end."""
        self.current.mark("end")

    # --- the case's thread ---

    def _wait(self, what: str) -> None:
        got = self.to_case.get()
        if isinstance(got, BaseException):
            raise got
        assert got == what, (got, what)

    def window(self, loss_of, batches, mark, update: bool) -> None:
        self.to_framework.put(Window(loss_of, batches, mark, update))
        if update:
            self._wait("idle")
            return
        self._wait("paused")
        mark("end")

    def update(self) -> None:
        """The step and reset of the window paused before its step (``update=False``)."""
        self.to_framework.put(GO)
        self._wait("idle")

    def close(self) -> None:
        if self.thread.is_alive():
            self.to_framework.put(STOP)
            self.thread.join(timeout=60)


class Feed:
    """A Trainer's training data: the case's windows, with no length (the case ends it), lazy
    for a framework that fetches one micro-batch ahead (``Driven.lazy_loader``)."""

    def __init__(self, path: Driven, lazy: bool = False) -> None:
        self.path, self.lazy = path, lazy

    def __iter__(self):
        # the Trainer is made: the case's threads again, whatever it set (accelerate sets its
        # own count on a CPU with a process group and no OMP_NUM_THREADS: 2 here, against the
        # plain loop's 1, and the pair's sums then differ in their last bits)
        torch.set_num_threads(self.path.threads)
        self.path.on_feed()
        return self.path.lazy_loader() if self.lazy else self.path.loader()


def _unmarked(label: str) -> None:
    pass
