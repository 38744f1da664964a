"""The facade's objects present themselves as ``citelock``'s, as httpx's do, in reprs, tracebacks and pickles.

``citelock.Guard``, not ``citelock.guard._guard.Guard``.

:func:`present` sets a public class's or function's ``__module__`` to ``citelock`` when the facade first hands it
out (``citelock.X`` or ``from citelock import X``: the facade loads its names lazily, so that is the one moment
every facade object passes through). A pickle then names ``citelock.X``, which unpickles through the same lazy
import. A class's own string annotations (and a dataclass's field types) are evaluated first, in the module that
wrote them, so that ``typing.get_type_hints`` and pydantic (which look names up in the module ``__module__``
names) still find them.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

__all__ = ["FACADE", "present"]

FACADE = "citelock"


def present(value: Any) -> None:
    """Make ``value`` (a public class or function of the package) report ``citelock`` as its module.

    Constants, type aliases and objects from outside the package are left as they are.
    """
    if not (inspect.isclass(value) or inspect.isfunction(value) or hasattr(value, "__wrapped__")):
        return
    home = getattr(value, "__module__", None)
    if not isinstance(home, str) or not home.startswith(FACADE + "."):
        return
    if inspect.isclass(value):
        _resolve_annotations(value, vars(sys.modules[home]))
    value.__module__ = FACADE


def _resolve_annotations(cls: type, namespace: dict[str, Any]) -> None:
    """Evaluate ``cls``'s own string annotations in the module that wrote them; one that does not resolve stays."""
    own = vars(cls).get("__annotations__")  # the class's own dict, changed in place
    if not isinstance(own, dict):
        return
    local = dict(vars(cls))
    for name, hint in list(own.items()):
        if isinstance(hint, str):
            try:
                own[name] = eval(hint, namespace, local)  # what typing.get_type_hints does, in the home module
            except Exception:  # a name only imported for type checkers: it did not resolve before either
                continue
    for field in getattr(cls, "__dataclass_fields__", {}).values():  # what pydantic reads of a dataclass
        if isinstance(field.type, str) and not isinstance(own.get(field.name, field.type), str):
            field.type = own[field.name]
