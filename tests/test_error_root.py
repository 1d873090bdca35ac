"""Every exception class the packages define derives from `instant_fold_core.errors.InstantFoldError`,
so callers catch kinds (`ConfigError`, `InvalidInputError`, ...) instead of matching message text.

Read from the source (ast), not imported: importing every module would pull in torch, ROS and the
simulators. A base class is followed through the names each module imports or defines.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = ("instant_fold_core.errors", "InstantFoldError")

#: Modules whose errors keep builtin bases on purpose: the Isaac Lab bridge's side that runs in the
#: Isaac Lab interpreter without the project (the client wraps their errors in `BridgeError`), and
#: test stand-ins whose exceptions never leave them.
EXEMPT_MODULES = {
    "instant_fold_sim.isaac_lab.protocol",
    "instant_fold_sim.isaac_lab.backend",
    "instant_fold_sim.isaac_lab.server",
    "instant_fold_sim.isaac_lab.assets",
    "instant_fold_control.testing.dobot_server",
}


def _modules() -> dict[str, tuple[ast.Module, bool]]:
    """Dotted module name -> (syntax tree, is a package), for every non-test module in src/."""
    found = {}
    for path in sorted(SRC.glob("*/instant_fold*/**/*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts[1:]  # drop the colcon package folder
        if "test" in parts:
            continue
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (ast.parse(path.read_text(), str(path)), is_package)
    return found


def _imported_names(module: str, tree: ast.Module, is_package: bool) -> dict[str, tuple[str, str]]:
    """Names bound by `from X import Y` anywhere in the module -> (X resolved to absolute, Y)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:  # relative to this module's package
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                source = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                names[alias.asname or alias.name] = (source, alias.name)
    return names


def _classes(modules: dict[str, tuple[ast.Module, bool]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(module, class) -> its bases as (module, name); a name neither defined nor imported is a
    builtin: ("builtins", name)."""
    classes: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for module, (tree, is_package) in modules.items():
        imported = _imported_names(module, tree, is_package)
        defined = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = []
                for base in node.bases:
                    name = ast.unparse(base)
                    if name in defined:
                        bases.append((module, name))
                    else:
                        bases.append(imported.get(name, ("builtins", name)))
                classes[(module, node.name)] = bases
    return classes


def _rooted(cls: tuple[str, str], classes: dict, seen: frozenset = frozenset()) -> bool:
    if cls == ROOT:
        return True
    if cls in seen or cls not in classes:
        return False
    return any(_rooted(base, classes, seen | {cls}) for base in classes[cls])


def _is_exception(cls: tuple[str, str], classes: dict, seen: frozenset = frozenset()) -> bool:
    if cls[0] == "builtins":
        return cls[1].endswith(("Error", "Exception")) or cls[1] in {"Exception", "BaseException"}
    if cls in seen or cls not in classes:
        return cls[1].endswith(("Error", "Exception"))  # an external library's error
    return any(_is_exception(base, classes, seen | {cls}) for base in classes[cls])


def test_every_exception_class_derives_from_the_root() -> None:
    classes = _classes(_modules())
    exceptions = [c for c in classes if _is_exception(c, classes)]
    assert len(exceptions) > 30 and ROOT in classes  # the scan found the packages' errors
    unrooted = [
        f"{module}.{name}"
        for module, name in exceptions
        if module not in EXEMPT_MODULES and not _rooted((module, name), classes)
    ]
    assert not unrooted, f"exception classes outside the InstantFoldError root: {unrooted}"
