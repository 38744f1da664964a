"""citelock: trustworthy citations for RAG answers.

Build a :class:`Citelock` client once (a backend, a prompt log, a :class:`Guard` with a surface policy, sinks)
and call ``client.answer(question, chunks)``: the prompt is assembled under a budget and logged exactly as sent,
the citations are constrained by construction, and every answer is guarded against the logged prompt. See the
README for the five-minute tour.

Every public name is importable from here, but ``import citelock`` loads none of the modules behind them
(no SQLAlchemy, numpy, or model SDK): each name is imported on first use. The names are written once, in
``__init__.pyi`` beside this file: type checkers read it as the package's surface, and
``lazy_loader.attach_stub`` derives ``__all__`` and the lazy imports from it. A public class or function
handed out here reports ``citelock`` as its ``__module__`` (``citelock.Guard``), as httpx's objects do.

The one wire between layers is made here, at the top: the telemetry integration observes every guard run
(:mod:`citelock._observe`), loaded at the first run, so the guard never imports telemetry.
"""

import lazy_loader

from citelock import _observe
from citelock._facade import present as _present

_lazy_getattr, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)


def __getattr__(name: str) -> object:
    value = _lazy_getattr(name)
    _present(value)  # its __module__ becomes "citelock", as httpx's objects' are
    globals()[name] = value  # later lookups skip this function
    return value


def _telemetry_observer() -> _observe.GuardObserver | None:
    """Telemetry's guard observer, loaded at the first guard run; later runs ask telemetry directly."""
    from citelock.telemetry._hook import guard_observer

    _observe.observe_guard(guard_observer)
    return guard_observer()


_observe.observe_guard(_telemetry_observer)
