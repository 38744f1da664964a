"""Versioned prompt templates (``prompts/*.vN.toml``) and rendering that records where every field landed."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from string import Formatter
from typing import Literal
from xml.sax.saxutils import escape as _xml_escape

from citelock.errors import InputError, UsageError

__all__ = ["PromptTemplate", "load_template", "prompts_dir"]

_PACKAGE_PROMPTS = Path(__file__).resolve().parents[1] / "prompts"
_SOURCE_PROMPTS = Path(__file__).resolve().parents[3] / "prompts"


def prompts_dir() -> Path:
    """The folder holding the templates: inside the installed wheel, else the source checkout's ``prompts/``."""
    return _PACKAGE_PROMPTS if _PACKAGE_PROMPTS.is_dir() else _SOURCE_PROMPTS


@dataclass(frozen=True)
class PromptTemplate:
    """A versioned two-message (system, user) template.

    ``user`` holds the fields ``{chunks}`` and ``{question}``; each chunk renders through ``chunk`` (fields
    ``{id}`` and ``{text}``) and chunks are joined by ``separator``. ``escape`` is applied to chunk text and
    the question (``xml`` or ``none``); the guard's normalization undoes it.
    """

    name: str
    version: str
    system: str
    user: str
    chunk: str
    separator: str = "\n"
    escape: Literal["xml", "none"] = "xml"

    def escaped(self, text: str) -> str:
        """Apply this template's escaping to ``text``."""
        if self.escape == "xml":
            return _xml_escape(text, {'"': "&quot;"})
        return text

    def render(self, fields: dict[str, str], which: Literal["user", "chunk"]) -> tuple[str, dict[str, int]]:
        """Fill ``which`` with ``fields`` (already escaped) and return the text and each field's start offset."""
        source = self.user if which == "user" else self.chunk
        out: list[str] = []
        starts: dict[str, int] = {}
        length = 0
        for literal, field, _spec, _conv in Formatter().parse(source):
            out.append(literal)
            length += len(literal)
            if field is None:
                continue
            if field not in fields:
                raise UsageError(f"template {self.name}.v{self.version}: unknown field {{{field}}}")
            starts[field] = length
            out.append(fields[field])
            length += len(fields[field])
        return "".join(out), starts


@cache
def load_template(name: str, version: str | None = None) -> PromptTemplate:
    """Load ``prompts/NAME.vVERSION.toml`` (the newest version when ``version`` is None).

    Raises:
        InputError: no such template, or the file lacks a required key.
    """
    folder = prompts_dir()
    if version is None:
        found = sorted(folder.glob(f"{name}.v*.toml"), key=lambda p: int(p.stem.rsplit(".v", 1)[1]))
        if not found:
            raise InputError(f"no prompt template named {name!r} in {folder.name}/ (expected {name}.vN.toml)")
        path = found[-1]
    else:
        path = folder / f"{name}.v{version}.toml"
        if not path.is_file():
            raise InputError(f"no prompt template {name}.v{version}.toml")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    missing = {"name", "version", "system", "user", "chunk"} - data.keys()
    if missing:
        raise InputError(f"template {path.name} lacks keys: {sorted(missing)}")
    escape = data.get("escape", "xml")
    if escape not in ("xml", "none"):
        raise InputError(f"template {path.name}: escape must be 'xml' or 'none', got {escape!r}")
    return PromptTemplate(
        name=str(data["name"]),
        version=str(data["version"]),
        system=str(data["system"]),
        user=str(data["user"]),
        chunk=str(data["chunk"]),
        separator=str(data.get("separator", "\n")),
        escape=escape,
    )
