"""The layout's rules, read from the source (ARCHITECTURE.md, "Imports run one way"): no import
circle in benches/, reports/ or strategies/ (a function's own import counts, and so does one
under ``if TYPE_CHECKING``: a circle hidden from the interpreter is one for the reader); the
engine never imports the sweep; the workloads import neither; reports/'s wings import one way
(schema <- judge <- page <- regressions), and the records import nothing of ours but the
records below them (row_parts <- records <- verdict_records)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("benches", "reports", "strategies")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _imported(node: ast.AST) -> list[str]:
    """The modules of ours an import statement names (``from pkg import sub``: the submodule)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODULES]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        subs = [f"{node.module}.{a.name}" for a in node.names]
        found = [s for s in subs if s in MODULES]
        if len(found) < len(subs) and node.module in MODULES:
            found.append(node.module)
        return found
    return []


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(name: str, type_only: bool = False) -> set[str]:
    """Every module of ours that ``name`` imports, at its top or inside a function (and under
    ``if TYPE_CHECKING`` with ``type_only``)."""
    out: set[str] = set()
    todo = list(ast.parse(MODULES[name].read_text()).body)
    while todo:
        node = todo.pop()
        if _type_checking(node) and not type_only:
            continue
        out.update(_imported(node))
        todo.extend(ast.iter_child_nodes(node))
    return out - {name}


GRAPH = {name: imports(name) for name in MODULES}
# a type-only import counts too, everywhere (reading Strategy must not mean reading the
# collector: base.Collected is what a strategy reads of it; a sweep's record is ``record``'s)
TYPED = {name: imports(name, type_only=True) for name in MODULES}


def _circle_from(start: str, graph: dict[str, set[str]] = GRAPH) -> list[str] | None:
    """A path of imports from ``start`` back to itself, or None."""
    stack, seen = [(start, [start])], set()
    while stack:
        name, path = stack.pop()
        for other in graph[name]:
            if other == start:
                return [*path, start]
            if other not in seen:
                seen.add(other)
                stack.append((other, [*path, other]))
    return None


def test_the_graph_sees_the_imports_it_must():
    assert "benches.engine.case" in GRAPH["benches.sweep.bycase"]  # a top-level one
    assert "benches.sweep.bycase" in GRAPH["benches.sweep.cli"]  # one inside a function
    assert "strategies._hooks" in GRAPH["strategies.lazy"]  # from a package, its submodule


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_circle(name):
    circle = _circle_from(name)
    assert circle is None, " -> ".join(circle)


@pytest.mark.parametrize("name", sorted(TYPED))
def test_no_import_circle_type_only_imports_included(name):
    circle = _circle_from(name, TYPED)
    assert circle is None, " -> ".join(circle)


def test_strategy_base_imports_nothing_of_ours_and_the_registry_only_base():
    assert TYPED["strategies.base"] == set()
    assert TYPED["strategies.registry"] == {"strategies.base"}


# (imported, importer) against a rule: the records import only the records below them
ALLOWED = {
    *(  # a case's settings: standard library only, every record may name them
        ("reports.schema.settings", f"reports.schema.{m}")
        for m in ("row_parts", "records", "verdict_records")
    ),
    ("reports.schema.row_parts", "reports.schema.records"),
    ("reports.schema.records", "reports.schema.verdict_records"),
}


@pytest.mark.parametrize(
    ("layer", "never"),
    [
        # the engine records, the reports summarise: the engine writes the schema's records only
        ("benches.engine", ("benches.sweep", "benches.micro", "reports.judge", "reports.page")),
        ("benches.workloads", ("benches.engine", "benches.sweep", "benches.micro")),
        ("reports", ("benches", "strategies")),
        ("strategies", ("benches", "reports")),
        ("reports.schema.settings", ("reports",)),
        ("reports.schema.row_parts", ("reports",)),
        ("reports.schema.records", ("reports",)),  # but row_parts, the records inside a row
        ("reports.schema.verdict_records", ("reports",)),  # but the records below it
        # the page's records: the schema's records and the targets, nothing else of ours
        ("reports.page.records", ("reports.page", "reports.regressions")),
        # the wings: schema <- judge <- page <- regressions
        ("reports.schema", ("reports.judge", "reports.page", "reports.regressions")),
        ("reports.judge", ("reports.page", "reports.regressions")),
        ("reports.page", ("reports.regressions",)),
    ],
)
def test_imports_run_one_way(layer, never):
    here = [m for m in MODULES if m == layer or m.startswith(f"{layer}.")]
    assert here
    wrong = sorted(
        f"{m} imports {o}"
        for m in here
        for o in GRAPH[m]
        if any(o == n or o.startswith(f"{n}.") for n in never)
        and not (o == layer or o.startswith(f"{layer}."))
        and (o, layer) not in ALLOWED
    )
    assert not wrong, wrong


def _outside(name: str) -> set[str]:
    """The top-level modules outside ours that ``name`` imports, anywhere in it."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out - {"reports", "benches", "strategies", "__future__"}


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("reports.schema")))
def test_the_schema_imports_the_standard_library_and_msgspec_only(name):
    """The records are read by the engine, the sweep, the report and Ray's workers alike."""
    assert _outside(name) - set(sys.stdlib_module_names) <= {"msgspec"}
