"""What the tests of scripts share: a script of the repository (benchmarks/, scripts/) loaded as a
module, so its functions are tested without running its command line."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_script(path: Path) -> ModuleType:
    """The script at `path` (absolute, or relative to the repository), imported under its stem."""
    path = path if path.is_absolute() else REPO / path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
