"""How many lines of the sync/async twins mirror each other, line for line.

A *twin pair* is an ``async def`` and the sync ``def`` it mirrors:

- ``async def aX`` (or ``_aX``) and ``def X`` (or ``_X``), or ``async def X`` and ``def X``;
- in the same class, or, for a method of a class named ``...Async...``, in the module's class of the same name
  without ``Async`` (``_AsyncCompletions.create`` and ``_Completions.create``); module-level functions pair in
  their module.

An async line *mirrors* its twin when, once ``async``/``await`` are dropped, the twins' ``a`` name prefixes are
dropped (every async name of a pair, and the async dunders ``__aiter__``/``__anext__``/``aclose``...) and
``Async`` type names become their sync names, it equals a line of the sync twin (whitespace stripped). Lines
counted are the function's source lines after its signature, without blank lines, comment-only lines and the
docstring; the signature is left out because twins share it by design.

Prints each pair (``mirrored/total`` async lines), then the total and its share.

Usage:
    python scripts/twins.py [--root src/citelock] [--quiet]
"""

from __future__ import annotations

import argparse
import ast
import re
from dataclasses import dataclass
from pathlib import Path

_ASYNC_NAMES = {
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "StopAsyncIteration": "StopIteration",
    "AsyncIterator": "Iterator",
    "AsyncIterable": "Iterable",
    "AsyncGenerator": "Generator",
    "aclosing": "closing",
    "aclose": "close",
    "anext": "next",
    "aiter": "iter",
}
"""Async names of the language and the standard library, and the sync name each mirrors."""

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Pair:
    """One twin pair: where it is, and its async lines that mirror the sync twin."""

    where: str
    mirrored: int
    total: int


def _sync_name(name: str) -> str | None:
    """``aX`` -> ``X``, ``_aX`` -> ``_X`` (None when the name has no ``a`` prefix)."""
    match = re.fullmatch(r"(_*)a([a-z_].*)", name)
    return match.group(1) + match.group(2) if match else None


def _scopes(tree: ast.Module) -> list[tuple[str, list[ast.stmt]]]:
    scopes: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            scopes.append((node.name, node.body))
    return scopes


def _functions(body: list[ast.stmt]) -> dict[str, list[Function]]:
    found: dict[str, list[Function]] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.setdefault(node.name, []).append(node)
    return found


def _pairs(tree: ast.Module) -> list[tuple[str, ast.AsyncFunctionDef, ast.FunctionDef]]:
    scopes = dict(_scopes(tree))
    table = {scope: _functions(body) for scope, body in scopes.items()}
    pairs = []
    for scope, functions in table.items():
        for name, nodes in functions.items():
            for node in nodes:
                if not isinstance(node, ast.AsyncFunctionDef):
                    continue
                places = [functions]
                if "Async" in scope and scope.replace("Async", "", 1) in table:
                    places.append(table[scope.replace("Async", "", 1)])
                twin = _twin(name, places)
                if twin is not None:
                    pairs.append((scope, node, twin))
    return pairs


def _twin(name: str, places: list[dict[str, list[Function]]]) -> ast.FunctionDef | None:
    for candidate in (_sync_name(name), name):
        if candidate is None:
            continue
        for functions in places:
            for node in functions.get(candidate, []):
                if isinstance(node, ast.FunctionDef):
                    return node
    return None


def _body_lines(node: Function, source: list[str]) -> list[str]:
    """The function's lines after its signature: stripped, no blanks, no comments, no docstring."""
    first = node.body[0]
    skip: set[int] = set()
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        skip = set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    start = first.lineno
    end = node.end_lineno or start
    lines = []
    for number in range(start, end + 1):
        if number in skip:
            continue
        text = source[number - 1].strip()
        if text and not text.startswith("#"):
            lines.append(text)
    return lines


def _normalized(line: str, renames: dict[str, str]) -> str:
    line = re.sub(r"\basync\s+(?=for\b|with\b|def\b)", "", line)
    line = re.sub(r"\bawait\s+", "", line)
    return re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*\b", lambda m: renames.get(m.group(0), m.group(0)), line)


def _shown(path: Path, root: Path) -> str:
    """The file's path from the repository root (``src/citelock/...``), else from ``root``'s parent."""
    base = root.parent.parent if root.parent.name == "src" else root.parent
    return path.relative_to(base).as_posix()


def measure(root: Path) -> list[Pair]:
    """Every twin pair under ``root`` with its mirrored and total async lines."""
    found: list[tuple[str, ast.AsyncFunctionDef, ast.FunctionDef, list[str]]] = []
    renames = dict(_ASYNC_NAMES)
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        source = text.splitlines()
        for scope, node, twin in _pairs(ast.parse(text)):
            if node.name != twin.name:
                renames[node.name] = twin.name
            where = f"{_shown(path, root)}:{node.lineno} {scope + '.' if scope else ''}"
            found.append((where + f"{node.name} ~ {twin.name}", node, twin, source))
    pairs = []
    for where, node, twin, source in found:
        sync = {_normalized(line, renames) for line in _body_lines(twin, source)}
        lines = _body_lines(node, source)
        mirrored = sum(1 for line in lines if _normalized(line, renames) in sync)
        pairs.append(Pair(where, mirrored, len(lines)))
    return pairs


def main() -> None:
    """Print every pair and the total."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent / "src" / "citelock")
    parser.add_argument("--quiet", action="store_true", help="print the total only")
    args = parser.parse_args()
    pairs = measure(args.root)
    if not args.quiet:
        width = max((len(p.where) for p in pairs), default=0)
        for pair in sorted(pairs, key=lambda p: (-p.mirrored, p.where)):
            print(f"{pair.where:<{width}}  {pair.mirrored:>3}/{pair.total:<3}")
    mirrored = sum(p.mirrored for p in pairs)
    total = sum(p.total for p in pairs)
    share = mirrored / total if total else 0.0
    print(f"{len(pairs)} pairs: {mirrored} of {total} async lines mirror their sync twin ({share:.0%})")


if __name__ == "__main__":
    main()
