"""instant_fold: bringup (launch files, configuration, default models, graphs, process runner, graph check)."""

from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "instant_fold"
ROOT = Path(__file__).resolve().parent
# launch/, config/ and models/ sit at the repository's top level (one place for users to look);
# this package installs them into share/instant_fold/, where every package looks them up at run
# time (instant_fold_ros.bringup_share), so a plain and a symlink install behave the same.
REPO = Path("..") / ".."


def tree(folder: str) -> list[tuple[str, list[str]]]:
    """data_files entries that mirror REPO/<folder> into share/<package>/<folder>."""
    entries: dict[str, list[str]] = {}
    for path in sorted((ROOT / REPO / folder).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            rel = path.relative_to(ROOT / REPO)
            entries.setdefault(f"share/{PACKAGE}/{rel.parent}", []).append(str(REPO / rel))
    return sorted(entries.items())


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        *tree("launch"),
        *tree("config"),
        *tree("models"),
    ],
    install_requires=["pyyaml"],
    zip_safe=True,
    maintainer="Instant-Fold developers",
    description="Instant-Fold bringup: launch files, configuration, process runner.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "run_graph = instant_fold.runner:main",
            "graph_check_source = instant_fold.graph_check:main_source",
            "graph_check_probe = instant_fold.graph_check:main_probe",
        ],
    },
)
