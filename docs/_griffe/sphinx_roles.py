"""A griffe extension for the API reference: Sphinx roles in docstrings become cross-references.

The library's docstrings use Sphinx roles (``:class:`~citelock.Guard```, ``:func:`check```, ...), which
mkdocstrings' Google-style parser leaves as literal text. This extension rewrites each role, before rendering, into
an optional autorefs cross-reference: a link when the target is documented on the site, plain code otherwise
(never a broken link, so ``mkdocs build --strict`` stays a real check). ``~`` shows the last component only, as in
Sphinx. A bare name is resolved in the scope of the object whose docstring holds it.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["SphinxRoles"]

_ROLE = re.compile(
    r":(?:py:)?(?:class|func|meth|data|attr|mod|exc|obj|const):`(?P<tilde>~)?(?P<target>[^`<>]+?)(?:\(\))?`"
)


def _target(obj: griffe.Object | griffe.Alias, name: str) -> str | None:
    name = name.lstrip(".")
    if "." in name:  # a public path (citelock.Guard.run) -> where it is defined, which the site documents
        try:
            return str(obj.modules_collection[name].final_target.path)
        except Exception:
            return name
    try:
        return obj.resolve(name)
    except Exception:
        return None


def _rewrite(obj: griffe.Object | griffe.Alias, text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        written = match["target"]
        shown = written.rsplit(".", 1)[-1] if match["tilde"] else written
        target = _target(obj, written)
        if target is None:
            return f"<code>{shown}</code>"
        slug = target.replace(".", "-")
        return f'<autoref identifier="{target}" slug="{slug}" optional><code>{shown}</code></autoref>'

    return _ROLE.sub(replace, text)


class SphinxRoles(griffe.Extension):
    """Rewrite Sphinx roles in every docstring into optional autorefs cross-references."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring (griffe calls this once per loaded object)."""
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = _rewrite(obj, obj.docstring.value)
