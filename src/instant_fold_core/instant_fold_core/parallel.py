"""Run independent jobs in this process, on local Ray workers, or on a Ray cluster.

The data generator and the evaluator both fan out many independent simulations; they scale out
on Ray (an existing engine) rather than a home-made pool. `run_jobs(fn, items, workers, address)`
yields `(item, result)` as jobs finish: in this process one after the other when `workers` is 1
and no address is given (no Ray needed), else as Ray tasks of one CPU each on a local cluster of
`workers` CPUs, or on the cluster at `address`. `fn` and the items must be importable/picklable
by Ray; an exception in a job is raised here once it arrives.

A local cluster is bound to 127.0.0.1, without a dashboard: on the machine's network address,
anyone who can reach Ray's services could submit work to them. Ray turns a node address of
127.0.0.1 into the machine's network address on purpose (`services.resolve_ip_for_localhost`)
unless multi-node clusters are switched off, which `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` does on
every OS (Ray reads it when it is imported, and its processes inherit it); the cluster's address
is checked after the start. Joining a cluster at `address` is the user's choice of network, and
left as Ray does it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

#: Where a local Ray cluster listens.
LOOPBACK = "127.0.0.1"
#: Ray's switch for single-node clusters on loopback (named after the OSes where it is the default).
SINGLE_NODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
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
    if address:
        import ray

        ray.init(address=address, log_to_driver=False)
    else:
        ray = _start_local_ray(workers)
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


def _start_local_ray(workers: int) -> Any:
    """Start a local Ray cluster of `workers` CPUs on 127.0.0.1; return the `ray` module."""
    os.environ[SINGLE_NODE_ENV] = "0"
    import ray

    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    gcs = ray.get_runtime_context().gcs_address
    if gcs.rpartition(":")[0] != LOOPBACK:
        ray.shutdown()
        raise RuntimeError(
            f"Ray's local cluster came up on {gcs}, not on {LOOPBACK} ({SINGLE_NODE_ENV}=0 must be set "
            "before Ray is imported); not running jobs on it"
        )
    return ray
