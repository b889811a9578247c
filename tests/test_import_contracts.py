"""Import contracts between the packages and runner's layers, read from the source (every module's AST).

Every import counts: module level, inside functions, and ``importlib.import_module("...")`` or ``__import__("...")``
with a string literal. Imports under ``if TYPE_CHECKING:`` count for the layer contracts (a type is a dependency) but
not for import cycles (they never run). A failure names the importing module and the line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("runner", "stats", "cluster")

# runner's sub-packages, bottom to top: a layer may import only the layers before it, so the package graph is a DAG.
# (providers below probes and sim: a provider never imports an experiment; sim registers itself with providers.)
LAYERS = ["core", "providers", "probes", "sim", "config", "output", "analysis", "execution", "reporting", "viewer", "importers", "cli"]

# Imports that break a contract today, each to be removed from here when fixed (a stale entry fails the test too).
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module (the submodule when ``from pkg import submodule``)
    path: Path
    line: int
    type_only: bool = False  # under ``if TYPE_CHECKING:``

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line} ({self.source} imports {self.target})"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for top in OURS for p in sorted((ROOT / top).rglob("*.py"))}


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in ``module``."""
    if level == 0:
        return name or ""
    base = module.split(".")
    base = base[: len(base) - level + (1 if is_package else 0)]
    return ".".join([*base, name] if name else base)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _string_import(node: ast.Call) -> str | None:
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called in {"import_module", "__import__"} and node.args:
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


@cache
def _imports() -> tuple[Import, ...]:
    modules = _modules()
    found: list[Import] = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        type_only = _type_checking_lines(tree)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node.level, node.module)
                # ``from pkg import sub`` imports the submodule when there is one, else a name of ``pkg``
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            elif isinstance(node, ast.Call) and (literal := _string_import(node)):
                targets = [literal]
            found += [Import(module, t, path, node.lineno, node.lineno in type_only) for t in dict.fromkeys(targets)
                      if t.split(".")[0] in OURS]
    return tuple(found)


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _layer(module: str) -> str | None:
    """The sub-package of runner that ``module`` belongs to (None for ``runner`` itself and its top-level modules)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "runner" and len(parts) > 1 and (ROOT / "runner" / parts[1]).is_dir() else None


def _checked() -> list[Import]:
    return [i for i in _imports() if (i.source, i.target) not in KNOWN_VIOLATIONS]


def _violations(source: str, forbidden: tuple[str, ...]) -> list[str]:
    return [i.where() for i in _checked() if _under(i.source, source) and any(_under(i.target, f) for f in forbidden)]


def test_the_scan_sees_the_code() -> None:
    imports = _imports()
    assert len(_modules()) > 100 and len(imports) > 300
    # a function-level import, and a relative-free ``from pkg import submodule``, are both seen
    assert any(i.source == "runner.providers" and i.target == "runner.providers.openai_wire" for i in imports)


@pytest.mark.parametrize(("source", "forbidden"), [
    ("stats", ("runner", "cluster")),
    ("runner", ("cluster",)),
    ("runner.providers", ("runner.probes", "runner.sim")),
])
def test_package_does_not_import(source: str, forbidden: tuple[str, ...]) -> None:
    bad = _violations(source, forbidden)
    assert not bad, f"{source} must not import {' or '.join(forbidden)}:\n  " + "\n  ".join(bad)


def test_core_imports_nothing_else_of_runner() -> None:
    bad = [i.where() for i in _checked()
           if _under(i.source, "runner.core") and _under(i.target, "runner") and not _under(i.target, "runner.core")]
    assert not bad, "runner.core must import nothing of runner outside runner.core:\n  " + "\n  ".join(bad)


def test_known_violations_still_exist() -> None:
    stale = KNOWN_VIOLATIONS - {(i.source, i.target) for i in _imports()}
    assert not stale, f"fixed: remove {sorted(stale)} from KNOWN_VIOLATIONS"


def test_every_runner_subpackage_has_a_layer() -> None:
    packages = {p.name for p in (ROOT / "runner").iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(LAYERS), "add the new sub-package to LAYERS, at the height of what it imports"


def test_runner_layers_import_only_downwards() -> None:
    bad = []
    for i in _checked():
        src, dst = _layer(i.source), _layer(i.target)
        if src and dst and LAYERS.index(dst) > LAYERS.index(src):
            bad.append(f"{i.where()}: {src} may import only {LAYERS[:LAYERS.index(src)]}")
    assert not bad, "imports up the layer graph (" + " < ".join(LAYERS) + "):\n  " + "\n  ".join(bad)


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (or a self-loop), by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_cycle_between_modules() -> None:
    modules = _modules()
    edges: dict[str, dict[str, Import]] = {}
    for i in _checked():
        if i.target in modules and i.target != i.source and not i.type_only:
            edges.setdefault(i.source, {}).setdefault(i.target, i)
    cycles = _cycles({k: sorted(v) for k, v in edges.items()})
    report = []
    for component in cycles:
        members = set(component)
        report.append(" <-> ".join(component) + ":\n    " + "\n    ".join(
            i.where() for src in component for dst, i in sorted(edges.get(src, {}).items()) if dst in members))
    assert not report, "import cycles between modules (function-level imports count):\n  " + "\n  ".join(report)
