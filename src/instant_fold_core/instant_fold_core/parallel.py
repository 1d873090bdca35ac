"""Run independent jobs in this process, on local Ray workers, or on a Ray cluster.

The data generator and the evaluator both fan out many independent simulations; they scale out
on Ray (an existing engine) rather than a home-made pool. `run_jobs(fn, items, workers, address)`
yields `(item, result)` as jobs finish: in this process one after the other when `workers` is 1
and no address is given (no Ray needed), else as Ray tasks of one CPU each on a local cluster of
`workers` CPUs, or on the cluster at `address`. `fn` and the items must be importable/picklable
by Ray; an exception in a job is raised here once it arrives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_jobs(
    fn: Callable[..., R],
    items: Iterable[T],
    workers: int = 1,
    address: str | None = None,
    args: tuple[Any, ...] = (),
) -> Iterator[tuple[T, R]]:
    """`fn(item, *args)` for every item; results in completion order."""
    items = list(items)
    if workers < 1:
        raise ValueError(f"workers: must be at least 1, got {workers}")
    if workers == 1 and address is None:
        for item in items:
            yield item, fn(item, *args)
        return
    if not items:
        return
    import ray

    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1)(fn)
        shared = [ray.put(a) for a in args]
        pending = {remote.remote(item, *shared): item for item in items}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            item = pending.pop(ready[0])
            yield item, ray.get(ready[0])
    finally:
        ray.shutdown()
