"""A demonstration's files: where its events JSON lives beside it, and the mode files a user creates get.

Shared by the extraction (`extract`), the correction page (`correction`) and the LeRobot export of a
bag (`lerobot_bag`), which each write or read them; a module of its own so that none of them
imports another for it.
"""

from __future__ import annotations

import os
from pathlib import Path


def events_path(demo_path: Path) -> Path:
    """Where the events JSON of a demonstration file lives."""
    return demo_path.with_name(demo_path.name.removesuffix(".safetensors") + ".events.json")


def user_file_mode() -> int:
    """The mode a file the user creates gets (0666 less the umask); safetensors writes 0600."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask
