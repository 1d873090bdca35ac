"""An isolated ROS domain per process group: the main job (`instant_fold.sim_fold`), the simulated
demonstration recorder and every test reserve one, so parallel runs on one machine never cross-talk.

`isolated_ros_env()` reserves a ROS_DOMAIN_ID that no other process on this machine holds (an
exclusive lock file per id) and returns an environment for child processes that uses it with
localhost-only discovery.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Domain ids that map to valid DDS ports on Linux (0-101); 0 is left to interactive use.
DOMAIN_IDS = range(1, 102)
LOCK_DIR = Path(tempfile.gettempdir()) / "instant_fold_ros_domains"


@contextmanager
def isolated_ros_env() -> Iterator[dict[str, str]]:
    """Yield a copy of os.environ with a reserved ROS_DOMAIN_ID; release it on exit."""
    LOCK_DIR.mkdir(exist_ok=True)
    start = os.getpid() % len(DOMAIN_IDS)
    for offset in range(len(DOMAIN_IDS)):
        domain = DOMAIN_IDS[(start + offset) % len(DOMAIN_IDS)]
        handle = open(LOCK_DIR / f"{domain}.lock", "w")  # noqa: SIM115 - held for the whole context
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        try:
            env = dict(os.environ)
            env.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1")
            yield env
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
        return
    raise RuntimeError(f"all ROS domain ids {DOMAIN_IDS.start}-{DOMAIN_IDS.stop - 1} are in use on this machine")
