"""The package's import graph: layers with one direction and no circles.

A module may import only from its own layer and the layers below it, and no set of modules may import each
other in a circle. Every import counts: top-level, inside functions (lazy), under ``TYPE_CHECKING``, the string
target of ``importlib.import_module("citelock...")``, and the stub a ``lazy_loader.attach_stub`` call loads. The
layers are the ones docs/architecture.md draws; a new module must be placed in one of them here (and there).
No layer holds two packages that import each other: each package has its own layer, so a loop cannot hide in
one.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "citelock"

# Lowest first. A module belongs to the first layer whose prefix it matches (longest prefix wins).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("citelock.reasons", "citelock._version"),
    ("citelock.records",),
    ("citelock.errors",),
    ("citelock._observe",),  # the hook a guard run exposes to an observer above it (telemetry)
    ("citelock._steps",),  # a request's steps written once, run blocking or awaited (the sync/async twins)
    ("citelock._around",),  # an iterator read step by step inside a context manager, blocking or async
    ("citelock.text",),
    ("citelock.prompt",),
    ("citelock.constraint",),
    ("citelock.runtime",),
    ("citelock.backends",),
    ("citelock.judges",),
    ("citelock.guard",),
    ("citelock.telemetry",),  # observes the guard through citelock._observe; typed against protocols, imports no guard
    ("citelock.store",),
    ("citelock.render",),
    ("citelock.stream",),
    ("citelock.config",),  # surfaces, judges, backends and the store named in citelock.toml (builds guards)
    ("citelock.pipeline", "citelock._guarded", "citelock._request"),  # the records it returns, the request core
    ("citelock._wrap",),
    ("citelock.adapters",),
    ("citelock.integrations",),  # LangChain, LlamaIndex, Haystack doors (issue 39)
    ("citelock.metrics",),
    ("citelock.audit",),
    ("citelock.review",),
    ("citelock.gateway",),  # the OpenAI-compatible HTTP door over wrap and the pipeline
    ("citelock.evals",),
    ("citelock.cli",),
    ("citelock", "citelock.__main__", "citelock._jsonschema", "citelock._facade"),
)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _targets(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        name = ".".join([*base, node.module] if node.module else base)
    else:
        name = node.module or ""
    out = [name]
    out += [f"{name}.{alias.name}" for alias in node.names if f"{name}.{alias.name}" in MODULES]
    return out


def _string_targets(module: str, call: ast.Call, path: Path) -> list[str]:
    """The modules a call imports by name: ``import_module("citelock.x")``, ``lazy_loader.attach_stub(...)``."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name == "import_module" and call.args and isinstance(call.args[0], ast.Constant):
        value = call.args[0].value
        return [value] if isinstance(value, str) else []
    if name == "attach_stub":  # the stub beside the module: its imports are this module's lazy imports
        stub = path.with_suffix(".pyi")
        tree = ast.parse(stub.read_text(encoding="utf-8"))
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        return [t for n in nodes for t in _targets(module, n, path.name == "__init__.py")]
    if name == "attach":
        found = [k.value for k in call.keywords if k.arg in ("submodules", "submod_attrs")]
        keys = [e.value for node in found if isinstance(node, ast.Dict | ast.Set | ast.List) for e in _elements(node)]
        base = module if path.name == "__init__.py" else module.rpartition(".")[0]
        return [f"{base}.{k}" for k in keys if isinstance(k, str)]
    return []


def _elements(node: ast.Dict | ast.Set | ast.List) -> list[ast.Constant]:
    items = node.keys if isinstance(node, ast.Dict) else node.elts
    return [e for e in items if isinstance(e, ast.Constant)]


def import_graph() -> dict[str, set[str]]:
    """Every citelock module and the citelock modules it imports (any import statement anywhere in it)."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        edges: set[str] = set()
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import | ast.ImportFrom):
                targets = _targets(module, node, path.name == "__init__.py")
            elif isinstance(node, ast.Call):
                targets = _string_targets(module, node, path)
            if targets:
                for target in targets:
                    while target and target not in MODULES:  # "citelock.x.Name" -> "citelock.x"
                        target = target.rpartition(".")[0]
                    if target.startswith("citelock") and target != module:
                        edges.add(target)
        graph[module] = edges
    return graph


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            exact_top = prefix == "citelock" and module != "citelock"
            if exact_top:
                continue
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = rank, len(prefix)
    return best


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in MODULES if layer_of(m) < 0)
    assert not unplaced, f"modules in no layer (add them to LAYERS and to docs/architecture.md): {unplaced}"


def test_no_upward_import() -> None:
    graph = import_graph()
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if target != "citelock" and layer_of(target) > layer_of(source)
    )
    assert not upward, "imports that run upward:\n" + "\n".join(upward)


def test_no_module_imports_the_facade() -> None:
    graph = import_graph()
    offenders = sorted(m for m, targets in graph.items() if "citelock" in targets and m != "citelock.__main__")
    assert not offenders, f"modules importing the top-level facade (import the module that defines it): {offenders}"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    # A package's __init__ re-exporting its own private modules is not a circle of meaning: leave those edges out.
    graph = {
        m: {t for t in targets if not (t.startswith(m + ".") and MODULES[m].name == "__init__.py")}
        for m, targets in import_graph().items()
    }
    graph = {m: {t for t in ts if t != "citelock"} for m, ts in graph.items()}
    circles = _circles(graph)
    assert not circles, f"import circles: {circles}"


def test_string_imports_are_edges_of_the_graph() -> None:
    graph = import_graph()
    assert "citelock.telemetry._otel" in graph["citelock.telemetry._hook"]  # importlib.import_module("...")
    assert "citelock.audit._ray" in graph["citelock.audit._run"]
    assert "citelock.pipeline" in graph["citelock"]  # lazy_loader.attach_stub: the stub's imports
    assert "citelock.telemetry._hook" not in graph["citelock.telemetry._otel"]  # the settings have their own module


def test_no_layer_shares_two_packages() -> None:
    shared = [prefixes for prefixes in LAYERS if len({p.split(".")[1] for p in prefixes if p != "citelock"}) > 1]
    allowed = [  # single modules side by side (no package): a record module beside its user, the facade's helpers
        ("citelock.reasons", "citelock._version"),
        ("citelock.pipeline", "citelock._guarded", "citelock._request"),
        ("citelock", "citelock.__main__", "citelock._jsonschema", "citelock._facade"),
    ]
    assert [p for p in shared if p not in allowed] == []
    assert layer_of("citelock.telemetry._otel") > layer_of("citelock.guard._guard")


def test_the_guard_imports_no_telemetry() -> None:
    # telemetry observes the guard (citelock._observe): no guard module reaches it by any import, string or stub
    graph = import_graph()
    reaching = sorted(
        f"{m} -> {t}" for m, ts in graph.items() if m.startswith("citelock.guard") for t in ts if "telemetry" in t
    )
    assert reaching == []
    assert "citelock._observe" in graph["citelock.guard._guard"]
    assert "citelock.telemetry._hook" in graph["citelock"]  # the facade makes the one wire


def test_the_layer_checker_catches_an_upward_import() -> None:
    assert layer_of("citelock.guard._policy") > layer_of("citelock.judges._routing")
    assert layer_of("citelock.backends._instructor") < layer_of("citelock.guard")
    assert layer_of("citelock.backends._outlines") == layer_of("citelock.backends._local")
    assert _circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


@pytest.mark.parametrize(
    "heavy",
    [
        "sqlalchemy", "numpy", "openai", "instructor", "llama_cpp", "outlines", "outlines_core", "llguidance",
        "torch", "httpx", "ray", "pyarrow", "opentelemetry",
    ],
)  # fmt: skip
def test_import_citelock_loads_no_heavy_dependency(heavy: str) -> None:
    code = f"import sys, citelock; print({heavy!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", f"`import citelock` imported {heavy}"


def test_judges_reach_the_server_through_the_runtime_never_through_a_backend() -> None:
    graph = import_graph()
    judges_on_backends = sorted(
        f"{m} -> {t}" for m, ts in graph.items() if m.startswith("citelock.judges") for t in ts if "backends" in t
    )
    assert judges_on_backends == []
    for module in ("citelock.judges._openai_completer", "citelock.backends._openai", "citelock.backends._instructor"):
        assert "citelock.runtime" in graph[module]  # OpenAITransport, through the runtime's face
