"""A progress bar for long runs: on stderr, on a terminal only, after a couple of seconds.

A run reports its progress as a fraction of its work (:meth:`Progress.update`); nothing is
drawn until :data:`DELAY` seconds have passed (a short run prints nothing), nor ever when
stderr is not a terminal (a pipe, a CI log, a test), and the bar is redrawn at most
:data:`INTERVAL` times a second. :meth:`Progress.close` erases it, so the run's report
follows on a clean line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

DELAY = 2.0  # seconds before the bar appears
INTERVAL = 0.1  # seconds between redraws
WIDTH = 30  # characters of the bar itself


class Progress:
    """``update(fraction, label)`` as work is done; ``close()`` at the end."""

    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None,
                 delay: float = DELAY, clock: Callable[[], float] = time.perf_counter) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self.delay = delay
        self._clock = clock
        self._start = self._clock()
        self._drawn_at: float | None = None
        self._width = 0

    def update(self, fraction: float, label: str = "") -> None:
        if not self.enabled:
            return
        now = self._clock()
        if now - self._start < self.delay:
            return
        if self._drawn_at is not None and now - self._drawn_at < INTERVAL and fraction < 1:
            return
        self._drawn_at = now
        fraction = min(max(fraction, 0.0), 1.0)
        filled = int(round(fraction * WIDTH))
        line = f"\r[{'#' * filled}{'.' * (WIDTH - filled)}] {fraction:4.0%} {label}"
        padding = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write(line + " " * padding)
        self.stream.flush()

    def close(self) -> None:
        """Erase the bar (if it was drawn)."""
        if self._drawn_at is not None:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._drawn_at = None


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False
