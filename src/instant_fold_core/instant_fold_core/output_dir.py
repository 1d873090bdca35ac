"""Output folders of command-line runs: created with a one-line error, and held by one run at a time.

Two runs writing one folder (two main jobs into `outputs/sim_fold/`, two generators into one
episode store) each claim the other's files, or delete them as "partial". `claimed_output_dir`
takes an exclusive `flock` on `<folder>/.lock` for the run's lifetime and refuses a second run with
the first one's process id (from the kernel's lock table). The kernel drops the lock when its
process ends, however it ends (SIGKILL included), so a crashed run never leaves a stale lock; the
empty file stays (removing it would let a third run lock a new file while the second still holds
the old one).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from instant_fold_core.errors import ArtifactError

LOCK_FILE = ".lock"


class OutputDirError(ArtifactError):
    """An output folder cannot be created, or another run holds it."""


def make_output_dir(path: str | Path, what: str = "--out") -> Path:
    """`path` as a folder (created with its parents); an existing file or an unwritable place is an
    OutputDirError naming `what` (the option that gave it), not a traceback."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputDirError(f"{what} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"{what} {path}: cannot create the directory ({exc.strerror or exc})") from exc
    return path


def _holder(fd: int) -> str:
    """The pid of the process holding the flock on `fd`'s file, as /proc/locks (Linux) lists it.

    Read from the kernel rather than written into the lock file: the file is never modified, so a
    run that only checks a folder (a resumed generator with nothing to do) leaves it as it was."""
    inode = str(os.fstat(fd).st_ino)
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return "unknown"
    for fields in (line.split() for line in lines):
        # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF"
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].rsplit(":", 1)[-1] == inode:
            return fields[4]
    return "unknown"


@contextmanager
def claimed_output_dir(path: str | Path, what: str = "--out") -> Iterator[Path]:
    """Create `path` (`make_output_dir`) and hold it for this run until the block ends; another
    run holding it is an OutputDirError naming its process id."""
    folder = make_output_dir(path, what)
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError as exc:
        raise OutputDirError(f"{what} {folder}: cannot create {LOCK_FILE} ({exc.strerror or exc})") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputDirError(
                f"{what} {folder}: in use by another run (pid {_holder(fd)}); wait for it or choose another {what}"
            ) from None
        yield folder
    finally:
        os.close(fd)  # releases the lock
