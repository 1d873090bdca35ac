"""Every workspace package a package's tests import is declared in its package.xml.

colcon orders builds and `colcon test` by those declarations, and rosdep/bloom install by them, so
an undeclared import works in this workspace by accident only. Tests that need packages which
depend on each other the other way round (the bringup's graphs with a node package) live here in
`tests/`, which belongs to no package.
"""

from __future__ import annotations

import ast
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = sorted(p.parent.name for p in SRC.glob("*/package.xml"))
DEPEND_TAGS = ("depend", "exec_depend", "build_depend", "test_depend")


def _declared(package: str) -> set[str]:
    root = ET.parse(SRC / package / "package.xml").getroot()
    return {element.text or "" for tag in DEPEND_TAGS for element in root.iter(tag)}


def _imported_packages(folder: Path) -> dict[str, set[str]]:
    """Workspace package -> test files of `folder` that import it."""
    found: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in PACKAGES:
                    found.setdefault(top, set()).add(path.name)
    return found


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
    done: set[str] = set()

    def visit(package: str, path: tuple[str, ...]) -> None:
        assert package not in path, f"dependency cycle: {' -> '.join((*path, package))}"
        if package in done:
            return
        for dep in sorted(edges[package]):
            visit(dep, (*path, package))
        done.add(package)

    for package in PACKAGES:
        visit(package, ())
    assert edges["instant_fold_core"] <= {"instant_fold_interfaces"}, "the core depends on no other package"


def _test_support_imports(folder: Path) -> dict[str, list[str]]:
    """Production files of `folder` (test support excluded) -> the test-support modules they import."""
    found: dict[str, list[str]] = {}
    for path in folder.rglob("*.py"):
        if "testing" in path.relative_to(folder).parts or path.stem == "testing":
            continue  # test support may build on test support
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            bad = [n for n in names if "testing" in n.split(".")]
            if bad:
                found.setdefault(str(path.relative_to(SRC)), []).extend(bad)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_production_code_never_imports_test_support(package: str) -> None:
    """Protocol peers, stand-ins, probes and random checkpoints (`testing` modules) serve tests and
    benchmarks only: a node or a CLI that imported one would ship a fake into a user's graph."""
    assert not _test_support_imports(SRC / package / package)


def _module_imports() -> dict[str, set[str]]:
    """Every production module of the workspace -> the workspace modules it imports (lazy imports
    inside functions included; `from package import name` counts `package.name` when that is a module)."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        root = SRC / package
        for path in (root / package).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        base = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                parent = base.rsplit(".", node.level - 1)[0] if node.level > 1 else base
                module = (f"{parent}.{node.module}" if node.module else parent) if node.level else node.module or ""
                targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            else:
                continue
            found.update(t for t in targets if t in modules and t != name)
        graph[name] = found
    return graph


def test_no_module_imports_itself_back() -> None:
    """No import circle between modules (lazy imports included): each module can be understood, and
    tested, from the modules it uses, never from one that uses it."""
    graph = _module_imports()
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                raise AssertionError(f"import circle: {' -> '.join([*path[path.index(dep) :], dep])}")
            if dep not in state:
                visit(dep, [*path, dep])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
