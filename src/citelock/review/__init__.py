"""The review desk: the review queue in a browser, for the people who fix citations (``citelock review serve``).

Server-rendered pages on the stores the pipeline already writes (SQLite by default, PostgreSQL for teams):
the queue grouped by reason code, each entry with the cited chunk *as the model saw it* and the span
highlighted at the offsets guard ① verified, one-keystroke outcomes (accept, repair, escalate) recorded
under the signed-in account, the metrics as charts, and exports (the fix list, and hand labels for
``citelock calibrate``). A JSON API with an OpenAPI description offers the same reads and actions.

Needs the ``review`` extra (``pip install "citelock[review]"``): FastAPI, Jinja2, uvicorn, argon2-cffi and
python-multipart.
"""

from citelock.errors import MissingExtraError

try:
    import fastapi  # noqa: F401
    import jinja2  # noqa: F401
    import python_multipart  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError("review", exc.name or "fastapi") from None

from citelock.review._app import DEFAULT_HOST, DEFAULT_PORT, create_app, serve
from citelock.review._desk import ReviewDesk
from citelock.review._export import FIX_LIST_COLUMNS, fix_list_csv, fix_list_jsonl, fix_list_row, labels_jsonl
from citelock.review._passwords import MIN_PASSWORD_LENGTH, authenticate, create_account, hash_password, set_password
from citelock.review._views import ChunkView, EntryView, PromptView, Segment, chunk_view, entry_view, prompt_view

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "FIX_LIST_COLUMNS",
    "MIN_PASSWORD_LENGTH",
    "ChunkView",
    "EntryView",
    "PromptView",
    "ReviewDesk",
    "Segment",
    "authenticate",
    "chunk_view",
    "create_account",
    "create_app",
    "entry_view",
    "fix_list_csv",
    "fix_list_jsonl",
    "fix_list_row",
    "hash_password",
    "labels_jsonl",
    "prompt_view",
    "serve",
    "set_password",
]
