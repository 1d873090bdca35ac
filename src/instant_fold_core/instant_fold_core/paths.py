"""Paths named in requests: opened or created only under folders the operator allowed.

A service request is input from anyone on the ROS domain. A path in it (a demonstration to load,
a folder to write an evaluation into) is accepted only when it resolves, symbolic links followed,
to somewhere under one of the node's allowed folders (its `file_roots` parameter). The refusal is
decided before the file system is touched for the path itself and reads the same whether the path
exists or not, so a request can neither read nor write elsewhere, nor probe what exists there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from instant_fold_core.errors import InvalidInputError


class PathNotAllowed(InvalidInputError):
    """A requested path lies outside the allowed folders."""


def allowed_roots(roots: Iterable[str]) -> tuple[Path, ...]:
    """The allowed folders, absolute and resolved (relative ones against the working directory).

    Resolved once, at start-up, so a later change of the working directory changes nothing.
    An empty list allows no path at all.
    """
    return tuple(Path(root).resolve() for root in roots if root)


def resolve_under(path: str | Path, roots: Sequence[Path], what: str) -> Path:
    """`path` resolved (relative to the working directory), if it lies under one of `roots`.

    Raises PathNotAllowed otherwise, naming the path as given and the allowed folders, never
    whether the path exists.
    """
    try:
        resolved: Path | None = Path(path).resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, an embedded NUL
        resolved = None
    if resolved is None or not any(resolved.is_relative_to(root) for root in roots):
        allowed = ", ".join(str(root) for root in roots) or "none"
        raise PathNotAllowed(
            f"{what} '{path}' is not under the allowed folders ({allowed}; the node's file_roots parameter)"
        )
    return resolved
