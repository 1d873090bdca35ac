"""Exact-stamp synchronisation of several topics (message_filters is not available as a wheel).

Camera drivers and the simulator stamp the colour image, depth image and mask of one frame with
the same header stamp; consumers need them together. `ExactTimeSync` keeps the few most recent
unmatched messages per topic and calls back once every topic has a message with that stamp.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any


def stamp_key(msg: Any) -> tuple[int, int]:
    return msg.header.stamp.sec, msg.header.stamp.nanosec


class ExactTimeSync:
    """Group messages of `keys` by header stamp; call `callback(dict key -> msg)` when complete."""

    def __init__(self, keys: Sequence[str], callback: Callable[[dict[str, Any]], None], queue_size: int = 4) -> None:
        self.keys = tuple(keys)
        self.callback = callback
        self.queue_size = queue_size
        self._pending: OrderedDict[tuple[int, int], dict[str, Any]] = OrderedDict()

    def add(self, key: str, msg: Any) -> None:
        if key not in self.keys:
            raise KeyError(f"ExactTimeSync: unknown key {key!r} (expected one of {self.keys})")
        stamp = stamp_key(msg)
        group = self._pending.setdefault(stamp, {})
        group[key] = msg
        if len(group) == len(self.keys):
            del self._pending[stamp]
            for older in [s for s in self._pending if s < stamp]:  # superseded, never completes in time
                del self._pending[older]
            self.callback(group)
            return
        while len(self._pending) > self.queue_size:
            self._pending.popitem(last=False)
