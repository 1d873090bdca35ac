"""Every workspace package a package's tests import is declared in its package.xml.

colcon orders builds and `colcon test` by those declarations, and rosdep/bloom install by them, so
an undeclared import works in this workspace by accident only. Tests that need packages which
depend on each other the other way round (the bringup's graphs with a node package) live here in
`tests/`, which belongs to no package.
"""

from __future__ import annotations

import ast
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = sorted(p.parent.name for p in SRC.glob("*/package.xml"))
DEPEND_TAGS = ("depend", "exec_depend", "build_depend", "test_depend")


def _declared(package: str) -> set[str]:
    root = ET.parse(SRC / package / "package.xml").getroot()
    return {element.text or "" for tag in DEPEND_TAGS for element in root.iter(tag)}


def _imports(path: Path, package: str = "") -> Iterator[str]:
    """The modules a file imports, lazy imports inside functions included: `import a.b` gives a.b,
    `from a import b` gives a and a.b (b may be a module); relative imports are resolved against
    `package` (the file's own package), and left out without one."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not package:
                    continue
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{parent}.{node.module}" if node.module else parent
            elif node.module:
                module = node.module
            else:
                continue
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def _imported_packages(folder: Path) -> dict[str, set[str]]:
    """Workspace package -> files of `folder` that import it."""
    found: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in PACKAGES:
                found.setdefault(top, set()).add(path.name)
    return found


def _production_modules() -> dict[str, tuple[Path, str]]:
    """Every production module of the workspace: dotted name -> (file, the package its relative
    imports resolve against)."""
    modules = {}
    for package in PACKAGES:
        root = SRC / package
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = (path, name if parts[-1] == "__init__" else name.rpartition(".")[0])
    return modules


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of `graph` (node -> the nodes it depends on) as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep, [*path, dep])):
                return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node, [node])):
            return found
    return None


@pytest.mark.parametrize("package", PACKAGES)
def test_tests_import_only_declared_packages(package: str) -> None:
    declared = _declared(package) | {package}
    undeclared = {
        name: sorted(files)
        for name, files in _imported_packages(SRC / package / "test").items()
        if name not in declared
    }
    assert not undeclared, f"{package}/package.xml does not declare what its tests import: {undeclared}"


#: Imports of a workspace package that its package.xml leaves undeclared on purpose, each with the
#: reason; every other import of a package's own code must be declared.
UNDECLARED_ON_PURPOSE = {
    # The LeRobot export reads a recorded bag only when asked (`--bag`), importing the demo package
    # then; the demo package's tests depend on this one, and colcon refuses the cycle a declaration
    # would make.
    ("instant_fold_learning", "instant_fold_demo"),
}


@pytest.mark.parametrize("package", PACKAGES)
def test_code_imports_only_declared_packages(package: str) -> None:
    """The package's own modules (lazy imports inside functions included) import only what it declares."""
    declared = _declared(package) | {package}
    undeclared = {
        name: sorted(files)
        for name, files in _imported_packages(SRC / package / package).items()
        if name not in declared and (package, name) not in UNDECLARED_ON_PURPOSE
    }
    assert not undeclared, f"{package}/package.xml does not declare what its code imports: {undeclared}"


def test_declared_dependencies_form_layers() -> None:
    """No two workspace packages depend on each other, directly or through others (test dependencies
    included, as colcon orders by them): the packages stack as layers, core at the bottom."""
    edges = {p: _declared(p) & set(PACKAGES) - {p} for p in PACKAGES}
    cycle = _cycle(edges)
    assert cycle is None, f"dependency cycle: {' -> '.join(cycle)}"
    assert edges["instant_fold_core"] <= {"instant_fold_interfaces"}, "the core depends on no other package"


def _test_support_imports(package: str) -> dict[str, list[str]]:
    """Production modules of `package` (test support excluded) -> the test-support modules they import."""
    found = {}
    for name, (path, base) in _production_modules().items():
        if name.split(".")[0] != package or "testing" in name.split("."):
            continue  # test support may build on test support
        bad = [n for n in _imports(path, base) if "testing" in n.split(".")]
        if bad:
            found[name] = bad
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_production_code_never_imports_test_support(package: str) -> None:
    """Protocol peers, stand-ins, probes and random checkpoints (`testing` modules) serve tests and
    benchmarks only: a node or a CLI that imported one would ship a fake into a user's graph."""
    assert not _test_support_imports(package)


def _module_imports() -> dict[str, set[str]]:
    """Every production module of the workspace -> the workspace modules it imports (lazy imports
    inside functions included; `from package import name` counts `package.name` when that is a module)."""
    modules = _production_modules()
    return {
        name: {m for m in _imports(path, base) if m in modules and m != name} for name, (path, base) in modules.items()
    }


def test_no_module_imports_itself_back() -> None:
    """No import circle between modules (lazy imports included): each module can be understood, and
    tested, from the modules it uses, never from one that uses it."""
    cycle = _cycle(_module_imports())
    assert cycle is None, f"import circle: {' -> '.join(cycle)}"
