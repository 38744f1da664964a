"""Size limits of the library's code: no function body over 100 lines, no module over 800, none in guard/ over 500.

A function's size is the lines of its body after the docstring (a typer command's option declarations are in
its signature, not its body). Methods and nested functions count on their own. A failure names every offender
as ``file:function:lines``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "citelock"

MAX_FUNCTION_BODY = 100
MAX_MODULE = 800
MAX_GUARD_MODULE = 500


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the last statement."""
    body = node.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        body = body[1:]
    if not body:
        return 0
    end = body[-1].end_lineno or body[-1].lineno
    return end - body[0].lineno + 1


def long_functions(source: str, name: str, limit: int = MAX_FUNCTION_BODY) -> list[str]:
    """``name:function:lines`` of every function in ``source`` whose body is over ``limit`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = _body_lines(node)
            if lines > limit:
                found.append(f"{name}:{node.name}:{lines}")
    return found


def _modules() -> list[tuple[str, str]]:
    return [
        (p.relative_to(PACKAGE.parent).as_posix(), p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))
    ]


def test_the_walk_sees_the_package() -> None:
    names = [name for name, _ in _modules()]
    assert "citelock/__init__.py" in names
    assert any(name.startswith("citelock/guard/") for name in names)


def test_no_function_body_over_100_lines() -> None:
    offenders = [hit for name, source in _modules() for hit in long_functions(source, name)]
    assert not offenders, f"function bodies over {MAX_FUNCTION_BODY} lines (split them into named steps): " + ", ".join(
        offenders
    )


def test_no_module_over_800_lines() -> None:
    offenders = [f"{name}:{n}" for name, source in _modules() if (n := len(source.splitlines())) > MAX_MODULE]
    assert not offenders, f"modules over {MAX_MODULE} lines: " + ", ".join(offenders)


def test_no_guard_module_over_500_lines() -> None:
    offenders = [
        f"{name}:{n}"
        for name, source in _modules()
        if name.startswith("citelock/guard/") and (n := len(source.splitlines())) > MAX_GUARD_MODULE
    ]
    assert not offenders, f"guard modules over {MAX_GUARD_MODULE} lines: " + ", ".join(offenders)


def test_the_count_is_the_body_after_the_docstring() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(4))
    source = (
        "def short(\n    a: int,\n    b: int,\n) -> None:\n"
        '    """A docstring\n\n    over lines."""\n' + body + "\n\n"
        "class K:\n    def method(self) -> None:\n" + body.replace("    ", "        ") + "\n"
        "        def inner() -> None:\n" + body.replace("    ", "            ") + "\n"
    )
    assert long_functions(source, "m.py", limit=4) == ["m.py:method:9"]
    assert sorted(long_functions(source, "m.py", limit=3)) == ["m.py:inner:4", "m.py:method:9", "m.py:short:4"]
