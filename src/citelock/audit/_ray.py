"""The Ray engine of ``citelock audit``: the audit as one Ray Data pipeline, read -> guard -> judge -> write.

``pip install "citelock[ray]"`` (Ray is an optional extra; without it :func:`run_ray` raises
:class:`~citelock.errors.MissingExtraError`). The work on each answer is the same as in the local engine
(:func:`~citelock.audit.prepare` then :func:`~citelock.audit.judge_prepared`), so both engines write the same
report rows; what Ray adds is where that work runs.

The stages, one streaming :class:`ray.data.Dataset` for the whole audit (one actor pool, built once):

- **read**: on the driver. :func:`~citelock.audit.read_items` streams the input there (rows already committed
  are skipped before anything is sent), and a feeder thread hands the rows to the cluster in batches through a
  bounded queue actor; a zero-CPU Ray Data read task turns each batch into a block. Reading stays on the driver
  so row numbers, keys and bad-row errors are those of the local engine, and the input files need only exist
  where the audit is started; parsing a row is far cheaper than guarding it, so one driver feeds many workers.
- **guard**: :func:`~citelock.audit.prepare` (builds the prompt record, parses the answer: CPU).
- **judge**: :func:`~citelock.audit.judge_prepared` in a pool of actors (a callable class), each building its
  :class:`~citelock.Guard` and judge once. With a judge on the CPU (``lexical``, ``offline``, or the free checks
  only), guard and judge run in the same actor, one per CPU of the cluster: Ray Data would fuse the two maps
  anyway, and the prompt record never has to cross a process. With a judge behind an OpenAI-compatible server
  (``judge_base_url``), guard runs as Ray tasks on the CPUs and the judge stage is a pool of light actors, each
  holding several judge calls in flight at once (a batch's answers on threads, one guard per thread) so the
  server can batch them.
- **write**: on the driver. Outcomes stream back with ``iter_batches`` and are committed through the audit's
  :class:`~citelock.audit.AuditSink` in parts of at least ``commit_rows`` (the local engine's committer), which
  makes the run resumable and exactly-once; on a failure or Ctrl-C what came back whole is committed first.

Every block holds one batch as a single row, so Ray Data neither gathers batches into bigger blocks nor splits
them: a batch streams on as soon as it is fed. What crosses processes: input rows as pickles (plain JSON data),
prepared records and outcomes as pydantic JSON (a pydantic model's pickle rebuilds every nested model on load:
3-6x slower to load than ``model_validate_json`` on these records, measured).

``address=None`` follows Ray's own rules (``RAY_ADDRESS``, else a cluster started with ``ray start`` on this
machine, else a new local Ray using every core); an address connects to that cluster. On a cluster, every node
needs citelock (and the judge's extras) installed at the same version as the driver.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import pickle
import socket
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from citelock.audit._local import DEFAULT_BATCH
from citelock.audit._rows import AuditItem
from citelock.audit._sink import DEFAULT_COMMIT_ROWS, DEFAULT_COMMIT_SECONDS, AuditSink, PartCommitter
from citelock.audit._work import AuditOutcome, AuditSettings, Prepared, judge_prepared, prepare
from citelock.errors import (
    BackendConnectionError,
    CitelockError,
    InputError,
    MissingExtraError,
    RuntimeFailure,
    UsageError,
)
from citelock.guard import Guard, GuardResult
from citelock.records import Answer, PromptRecord

__all__ = ["DEFAULT_JUDGE_CONCURRENCY", "run_ray"]

DEFAULT_JUDGE_CONCURRENCY = 8
"""Judge calls each actor keeps in flight against a judge server (``judge_base_url``)."""

_PICKLE = pickle.HIGHEST_PROTOCOL
_QUEUE_BATCHES_PER_ACTOR = 2
_SERVER_ACTOR_CPUS = 0.5
_PROBE_SECONDS = 5.0


def run_ray(
    items: Iterable[AuditItem],
    settings: AuditSettings,
    sink: AuditSink,
    *,
    address: str | None = None,
    batch_size: int = DEFAULT_BATCH,
    on_progress: Callable[[int], None] | None = None,
    commit_rows: int = DEFAULT_COMMIT_ROWS,
    commit_seconds: float = DEFAULT_COMMIT_SECONDS,
    actors: int | None = None,
    judge_concurrency: int = DEFAULT_JUDGE_CONCURRENCY,
    guard: Guard | None = None,
) -> None:
    """Audit ``items`` on a Ray cluster and commit every outcome through ``sink`` (on this, the driver, process).

    Args:
        items: The answers to audit (:func:`~citelock.audit.read_items`); those whose key the sink already
            committed are skipped before anything is sent to the cluster.
        settings: How each answer is guarded; every actor builds its guard from them once.
        sink: Where outcomes are committed, a batch at a time (the sink makes reruns resume, exactly once).
        address: A Ray cluster's address (``HOST:PORT`` or ``ray://...``); None: Ray's default (see the module).
            When this process is already connected to Ray, that connection is used (and ``address`` must be None).
        batch_size: Answers per block (one actor call).
        on_progress: Called with the number of answers done, as each batch comes back.
        commit_rows: Answers per committed part, at least (the last one may be smaller), as in the local engine.
        commit_seconds: Commit what came back at least this often.
        actors: Size of the judge stage's actor pool; None: one per CPU of the cluster (with a judge server:
            one per two CPUs).
        judge_concurrency: With a judge server, judge calls each actor keeps in flight.
        guard: The guard this process already built from ``settings`` (the proof that they build, so it is not
            built twice here); None: one is built here, before any work is sent. Every actor builds its own.

    Raises:
        MissingExtraError: Ray is not installed (``pip install "citelock[ray]"``).
        InputError: ``batch_size``, ``commit_rows``, ``actors`` or ``judge_concurrency`` below 1.
        UsageError: an address while this process is already connected to Ray; settings that cannot build a
            guard (here, or on a Ray worker: a file the options name that is not on that node ...; the message
            says where).
        BackendConnectionError: the Ray cluster, or the judge's server, cannot be reached (from here or from a
            Ray worker).
        BackendTimeoutError: the judge's server did not answer in time.
        RuntimeFailure: the pipeline failed or returned fewer answers than it was given (nothing is lost: every
            committed answer stays committed, and a rerun continues with the rest).
    """
    ray = _require_ray()
    for name, value in (
        ("batch_size", batch_size),
        ("commit_rows", commit_rows),
        ("judge_concurrency", judge_concurrency),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{name} must be a positive integer, got {value!r}")
    if actors is not None and (isinstance(actors, bool) or not isinstance(actors, int) or actors < 1):
        raise InputError(f"actors must be a positive integer or None, got {actors!r}")
    if guard is None:
        settings.build_guard()  # a bad combination (or an unreachable judge server) fails here, before work is sent
    todo = sink.todo(items)
    with _connected(ray, address):
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        plan = _Plan.of(settings, cpus, actors, judge_concurrency)
        feed = _Feed(ray, todo, batch_size, queue_size=_QUEUE_BATCHES_PER_ACTOR * plan.actors + 1)
        committer = PartCommitter(sink, commit_rows, commit_seconds, on_progress)
        try:
            returned = _stream(ray, feed, settings, plan, committer)
            committer.flush()
        except BaseException:
            committer.salvage()  # what came back whole is committed; a rerun continues with the rest
            raise
        finally:
            feed.close()
        if feed.error is not None:
            raise feed.error
        if returned < feed.sent:
            raise RuntimeFailure(
                f"the Ray pipeline returned {returned} of the {feed.sent} answers sent to it; "
                "the others were not committed: run the audit again to continue with them"
            )


@dataclass(frozen=True)
class _Plan:
    """How the guard and judge stages are laid out on the cluster."""

    actors: int
    server: bool
    concurrency: int

    @classmethod
    def of(cls, settings: AuditSettings, cpus: int, actors: int | None, concurrency: int) -> _Plan:
        server = settings.judge_base_url is not None or settings.escalate_base_url is not None
        default = max(1, cpus // 2) if server else cpus
        return cls(actors=actors or default, server=server, concurrency=concurrency if server else 1)


def _require_ray() -> Any:
    try:
        import ray
        import ray.data  # the extra is ray[data]: pyarrow and pandas come with it
    except ImportError:
        raise MissingExtraError("ray", "ray") from None
    return ray


@contextmanager
def _connected(ray: Any, address: str | None) -> Iterator[None]:
    """Connect to Ray for the audit (and disconnect after), or use this process's existing connection."""
    if ray.is_initialized():
        if address is not None:
            raise UsageError(
                f"this process is already connected to Ray: run the audit without an address to use that "
                f"connection, or from a fresh process to connect to {address}"
            )
        yield
        return
    _probe(address if address is not None else os.environ.get("RAY_ADDRESS"))
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        ray.init(address=address, **options)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        where = address or "the default address (RAY_ADDRESS, or a local Ray)"
        raise BackendConnectionError(
            f"could not connect to the Ray cluster at {where}: {exc}", provider="ray", retryable=True
        ) from None
    try:
        yield
    finally:
        ray.shutdown()


def _probe(address: str | None) -> None:
    """Fail fast when nothing listens at a ``HOST:PORT`` address (Ray itself retries for many minutes)."""
    if not address or "://" in address:
        return
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit():
        return  # "auto", "local": Ray's own keywords
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=_PROBE_SECONDS):
            pass
    except OSError as exc:
        raise BackendConnectionError(
            f"could not connect to the Ray cluster at {address}: nothing answers there ({exc.strerror or exc})",
            provider="ray",
            retryable=True,
        ) from None


class _Feed:
    """Hands the driver's items to the cluster in batches, from a thread, through a bounded Ray queue."""

    def __init__(self, ray: Any, items: Iterator[AuditItem], batch_size: int, *, queue_size: int) -> None:
        from ray.util.queue import Queue

        self._ray = ray
        self._items = items
        self._batch_size = batch_size
        self.queue = Queue(maxsize=queue_size, actor_options={"num_cpus": 0})
        self.sent = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="citelock-audit-feed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        keys: list[str] = []
        data: list[bytes] = []
        try:
            for item in self._items:
                keys.append(item.key)
                data.append(pickle.dumps(item, _PICKLE))
                if len(keys) >= self._batch_size:
                    if not self._put((keys, data)):
                        return
                    self.sent += len(keys)
                    keys, data = [], []
            if keys and self._put((keys, data)):
                self.sent += len(keys)
        except BaseException as exc:  # reading failed (an input became unreadable): stop, report on the driver
            self.error = exc
        try:
            self._put(None)  # end of input: the read task returns, the pipeline drains
        except Exception as exc:  # the queue is gone: the pipeline fails too, and the driver reports that
            self.error = self.error or exc

    def _put(self, batch: tuple[list[str], list[bytes]] | None) -> bool:
        from ray.util.queue import Full

        while not self._stop.is_set():
            try:
                self.queue.put(batch, timeout=0.5)
                return True
            except Full:
                continue
        return False

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.queue.shutdown(force=True)


def _read_batches(queue: Any) -> Iterator[Any]:
    """The read task: one block per batch the driver feeds, until the end-of-input marker."""
    while True:
        batch = queue.get()
        if batch is None:
            return
        yield _block([batch])


def _datasource(queue: Any) -> Any:
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    class AuditRows(Datasource):
        """The driver's rows, as fed through ``queue`` (one read task; it reads no file)."""

        def get_name(self) -> str:
            return "AuditRows"

        def estimate_inmemory_data_size(self) -> int | None:
            return None

        def get_read_tasks(
            self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
        ) -> list[Any]:
            meta = BlockMetadata(num_rows=None, size_bytes=None, input_files=None, exec_stats=None)
            return [ReadTask(partial(_read_batches, queue), meta)]

    return AuditRows()  # type: ignore[no-untyped-call]  # Ray's Datasource.__init__ is untyped


def _pipeline(ray: Any, queue: Any, settings: AuditSettings, plan: _Plan) -> Any:
    """The dataset: read (the driver's batches) -> guard -> judge; every block is one batch of answers."""
    from ray.data import ActorPoolStrategy

    with _data_options(ray):
        ds = ray.data.read_datasource(_datasource(queue), num_cpus=0, override_num_blocks=1)
        if plan.server:
            ds = ds.map_batches(_prepare_batch, batch_size=None, batch_format="pyarrow", num_cpus=1)
            return ds.map_batches(
                _JudgeActor,
                fn_constructor_args=(settings, plan.concurrency),
                compute=ActorPoolStrategy(size=plan.actors),
                batch_size=None,
                batch_format="pyarrow",
                num_cpus=_SERVER_ACTOR_CPUS,
            )
        return ds.map_batches(
            _AuditActor,
            fn_constructor_args=(settings,),
            compute=ActorPoolStrategy(size=plan.actors),
            batch_size=None,
            batch_format="pyarrow",
            num_cpus=1,
        )


def _stream(
    ray: Any,
    feed: _Feed,
    settings: AuditSettings,
    plan: _Plan,
    committer: PartCommitter,
) -> int:
    """Run the pipeline and hand every batch that comes back to the committer; returns the answers returned."""
    ds = _pipeline(ray, feed.queue, settings, plan)
    feed.start()
    returned = 0  # a block Ray retried may come back twice: the committer counts each answer once
    with _quiet_logger("ray.data"), warnings.catch_warnings():
        # A small audit (or the rest of a resumed one) can be fewer batches than actors: Ray warns, nothing is wrong.
        warnings.filterwarnings("ignore", "The minimum number of concurrent actors", UserWarning)
        blocks = iter(ds.iter_batches(batch_size=None, batch_format="pyarrow"))
        while True:
            try:
                block = next(blocks)
            except StopIteration:
                return returned
            except Exception as exc:
                raise _cause(exc) from None
            for _, data in _batches(block):
                returned += committer.add([_decode_outcome(item) for item in data])


@contextmanager
def _data_options(ray: Any) -> Iterator[None]:
    """Ray Data options for the datasets built inside (a dataset keeps a copy of the context it was built in)."""
    context = ray.data.DataContext.get_current()
    saved = {name: getattr(context, name) for name in _DATA_OPTIONS if hasattr(context, name)}
    for name in saved:
        setattr(context, name, _DATA_OPTIONS[name])
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(context, name, value)


@contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    """Ray Data's own execution log (start, finish, progress) off while the audit prints its progress."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


_DATA_OPTIONS: dict[str, Any] = {
    "enable_progress_bars": False,  # the audit draws its own progress bar
    "print_on_execution_start": False,
    "raise_original_map_exception": True,  # a judge server that is down surfaces as its own exception
    "enable_auto_log_stats": False,
    # Every block is one batch (one row): emit it as soon as it is made, never gather blocks up to a size.
    "target_max_block_size": 1,
}


def _cause(exc: BaseException) -> BaseException:
    """The citelock error behind a Ray failure (a judge server down, ...), else a RuntimeFailure naming it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, CitelockError):
            return _plain(current)
        current = getattr(current, "cause", None) or current.__cause__
    return RuntimeFailure(f"the Ray pipeline failed: {type(exc).__name__}: {_first_line(exc)}")


def _plain(exc: CitelockError) -> CitelockError:
    """A citelock error as raised in the worker: Ray's wrapper subclasses it and adds the remote traceback."""
    if type(exc).__module__.partition(".")[0] == "citelock":  # "citelock" itself for the facade's errors
        return exc
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, CitelockError) else exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


def _block(batches: Sequence[tuple[list[str], list[bytes]]]) -> Any:
    """A block of whole batches, one row each (``keys``, ``data``): Ray Data never splits or merges a batch."""
    import pyarrow as pa

    return pa.table(
        {
            "keys": pa.array([keys for keys, _ in batches], pa.list_(pa.string())),
            "data": pa.array([data for _, data in batches], pa.list_(pa.binary())),
        }
    )


def _batches(table: Any) -> list[tuple[list[str], list[bytes]]]:
    return list(zip(table.column("keys").to_pylist(), table.column("data").to_pylist(), strict=True))


def _items(data: list[bytes]) -> list[AuditItem]:
    return [pickle.loads(item) for item in data]


def _prepare_batch(table: Any) -> Any:
    """Guard stage on its own (Ray tasks): items in, prepared records out."""
    out = []
    for keys, data in _batches(table):
        out.append((keys, [_encode_prepared(prepare(item)) for item in _items(data)]))
    return _block(out)


class _AuditActor:
    """Guard and judge stages in one actor (a judge on the CPU): builds its guard once."""

    def __init__(self, settings: AuditSettings) -> None:
        # A guard that cannot be built here (a file the options name that is not on this node, a judge server
        # this node cannot reach) is raised by the first call, where Ray hands it to the driver as itself and
        # the audit stops, rather than as an actor that failed to start, which Ray would keep restarting.
        self.guard: Guard | None = None
        self.error: Exception | None = None
        try:
            self.guard = settings.build_guard()
        except Exception as exc:
            self.error = _setup_failure(exc)

    def __call__(self, table: Any) -> Any:
        if self.guard is None:
            raise self.error or RuntimeFailure("the audit actor has no guard")
        out = []
        for keys, data in _batches(table):
            outcomes = [judge_prepared(prepare(item), self.guard) for item in _items(data)]
            out.append((keys, [_encode_outcome(o) for o in outcomes]))
        return _block(out)


class _JudgeActor:
    """Judge stage against a judge server: a batch's answers on ``concurrency`` threads, one guard per thread."""

    def __init__(self, settings: AuditSettings, concurrency: int) -> None:
        self.settings = settings
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="citelock-judge")

    def _guard(self) -> Guard:
        guard: Guard | None = getattr(self.local, "guard", None)
        if guard is None:
            try:
                guard = self.local.guard = self.settings.build_guard()
            except Exception as exc:
                raise _setup_failure(exc) from None
        return guard

    def _judge(self, data: bytes) -> AuditOutcome:
        return judge_prepared(_decode_prepared(data), self._guard())

    def __call__(self, table: Any) -> Any:
        out = []
        for keys, data in _batches(table):
            out.append((keys, [_encode_outcome(o) for o in self.pool.map(self._judge, data)]))
        return _block(out)


def _setup_failure(exc: Exception) -> Exception:
    """The error of a guard a Ray worker could not build, saying so; of the same kind, so of the same exit code."""
    where = (
        f"a Ray worker on {socket.gethostname()} could not build the guard (every node needs citelock, the "
        "judge's extras and the files the options name, at the same paths)"
    )
    if isinstance(exc, CitelockError):
        error = copy.copy(exc)
        error.args = (f"{where}: {exc}", *exc.args[1:])
        return error
    if isinstance(exc, OSError):
        return InputError(f"{where}: {exc}")
    return RuntimeFailure(f"{where}: {type(exc).__name__}: {exc}")


def _encode_prepared(prepared: Prepared) -> bytes:
    data = {
        "key": prepared.key,
        "source": prepared.source,
        "row": prepared.row,
        "record": prepared.record.model_dump_json() if prepared.record is not None else None,
        "answer": prepared.answer.model_dump_json() if prepared.answer is not None else None,
        "error": prepared.error,
        "request_id": prepared.request_id,
    }
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


def _decode_prepared(data: bytes) -> Prepared:
    fields = json.loads(data)
    record = fields.pop("record")
    answer = fields.pop("answer")
    return Prepared(
        **fields,
        record=PromptRecord.model_validate_json(record) if record is not None else None,
        answer=Answer.model_validate_json(answer) if answer is not None else None,
    )


def _encode_outcome(outcome: AuditOutcome) -> bytes:
    data = {
        "key": outcome.key,
        "source": outcome.source,
        "row": outcome.row,
        "report": outcome.report,
        "result": outcome.result.model_dump_json() if outcome.result is not None else None,
        "result_key": outcome.result_key,
    }
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


def _decode_outcome(data: bytes) -> AuditOutcome:
    fields = json.loads(data)
    result = fields.pop("result")
    return AuditOutcome(**fields, result=GuardResult.model_validate_json(result) if result is not None else None)
