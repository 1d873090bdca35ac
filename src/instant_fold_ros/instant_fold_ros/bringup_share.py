"""Where the bringup's files are: `config/`, `launch/` and `models/` of the package `instant_fold`.

The repository keeps them at its top level (one place for users to look); the bringup package
installs them into `share/instant_fold/` (copies with a plain `colcon build`, links with
`--symlink-install`), and every package finds them there through the ament index, the way
`ros2 launch` finds launch files. The look-up happens at run time, so node packages need no
dependency on the bringup (which depends on them). Nothing here depends on where this module's
own file lies, so a plain install, a symlink install and an apt/Docker install behave the same.

Order: `$INSTANT_FOLD_CONFIG` / `$INSTANT_FOLD_MODELS` (explicit folders, e.g. models trained
elsewhere), else the installed share folder, else, where no install of `instant_fold` exists (the
packages on PYTHONPATH without colcon), the current directory when it is a source checkout (has
`config/graphs/` and `launch/`). A file added to the repository's `config/` reaches the share
folder with the next build (`scripts/bootstrap.sh`).
"""

from __future__ import annotations

import os
from pathlib import Path

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

from instant_fold_core.errors import ConfigError

#: The bringup package whose share folder holds config/, launch/ and models/.
BRINGUP = "instant_fold"
CONFIG_ENV = "INSTANT_FOLD_CONFIG"
MODELS_ENV = "INSTANT_FOLD_MODELS"


def _is_checkout(folder: Path) -> bool:
    return (folder / "config" / "graphs").is_dir() and (folder / "launch").is_dir()


def share_dir() -> Path:
    """`share/instant_fold` of the sourced install, else the current directory if it is a checkout."""
    try:
        return Path(get_package_share_directory(BRINGUP, print_warning=False))
    except PackageNotFoundError:
        pass
    if _is_checkout(Path.cwd()):
        return Path.cwd()
    raise ConfigError(
        f"package '{BRINGUP}' is not installed (source install/setup.bash, e.g. through scripts/env.sh) "
        f"and {Path.cwd()} is not an Instant-Fold checkout; or set ${CONFIG_ENV} and ${MODELS_ENV}"
    )


def config_dir() -> Path:
    """The configuration folder (robots, graphs, benchmarks, node parameters)."""
    env = os.environ.get(CONFIG_ENV)
    return Path(env) if env else share_dir() / "config"


def launch_dir() -> Path:
    """The launch files (`ros2 launch instant_fold <file>` reads the same folder)."""
    return share_dir() / "launch"


def models_dir() -> Path:
    """The default models: encoder, policy, demonstrations, oracle banks.

    An install built before the bringup installed `models/` has a share folder without it; callers
    that fall back to building what is missing (the evaluator's oracle bank: hours) would then do so
    silently, so a missing folder is an error that says how to rebuild.
    """
    env = os.environ.get(MODELS_ENV)
    if env:
        return Path(env)
    folder = share_dir() / "models"
    if not folder.is_dir():
        raise ConfigError(
            f"{folder} does not exist: the install of '{BRINGUP}' predates its models/ (rebuild it: "
            f"scripts/bootstrap.sh), or set ${MODELS_ENV}"
        )
    return folder
