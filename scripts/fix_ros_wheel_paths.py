"""Point the ROS wheels' exported CMake files and ament index at this virtual environment.

The ROS 2 wheels are built in a manylinux container whose interpreter lives under
/opt/python/cpXY-cpXY. Their exported CMake targets (used when colcon builds our interface
package) name that container's Python and numpy include folders, and the ament index records it
as the parent prefix. This rewrites those paths, idempotently, to the running interpreter's.

Usage: python fix_ros_wheel_paths.py <venv prefix>
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

import numpy

BUILD_PREFIX = re.compile(r"/opt/python/cp\d+-cp\d+")


def rewrite(text: str, prefix: str, python_include: str, numpy_include: str) -> str:
    """Replace the build container's include folders and prefix with this environment's."""
    text = re.sub(BUILD_PREFIX.pattern + r"/include/python3\.\d+", python_include, text)
    text = re.sub(BUILD_PREFIX.pattern + r"/lib/python3\.\d+/site-packages/numpy/_core/include", numpy_include, text)
    text = re.sub(BUILD_PREFIX.pattern + r"/lib/python3\.\d+/site-packages/numpy/core/include", numpy_include, text)
    return BUILD_PREFIX.sub(prefix, text)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    prefix = str(Path(argv[0]).resolve())
    python_include = sysconfig.get_paths()["include"]
    numpy_include = numpy.get_include()
    roots = [Path(prefix) / "share"]
    changed = 0
    for root in roots:
        for path in root.rglob("*"):
            if not path.is_file() or path.suffix not in {".cmake", ""} or path.stat().st_size > 2_000_000:
                continue
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            if "/opt/python/cp" not in text:
                continue
            path.write_text(rewrite(text, prefix, python_include, numpy_include))
            changed += 1
    print(f"[bootstrap] pointed {changed} ROS wheel files at {prefix}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
