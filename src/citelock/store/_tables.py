"""Creating and upgrading a store's tables, safe under any number of processes opening a new database at once.

Every store opens its tables with :func:`ensure_tables`. A quick read-only look decides whether anything is
missing (a table, a column, a PostgreSQL ``VARCHAR`` too narrow, an append-only trigger); when something is,
the creation runs inside :func:`~citelock.store._engine.serialized`: one process at a time, in one transaction
(DDL is transactional on both SQLite and PostgreSQL), and each re-checks what exists once it holds the lock. So
eight first writers on a new database create the tables once, and none sees a half-made schema or an
"already exists" error.

Append-only tables get database triggers that refuse ``UPDATE`` and ``DELETE`` (and ``TRUNCATE`` on
PostgreSQL): a mistake in code, or a user with a SQL shell who does not first drop the triggers, cannot rewrite
history. Dropping a trigger (or the table) needs the schema owner's rights and is not prevented here; the
prompt log's hash chain is what makes such a rewrite evident.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from sqlalchemy import Column, Connection, Engine, MetaData, String, inspect, text

from citelock.store._engine import serialized

__all__ = [
    "append_only_triggers",
    "disabled_triggers",
    "ensure_tables",
    "existing_tables",
    "existing_triggers",
    "refuse_triggers",
    "trigger_names",
]

_DDL_LOCK = "ddl"

_PG_FUNCTIONS = [
    "CREATE OR REPLACE FUNCTION citelock_refuse() RETURNS trigger AS $$ BEGIN "
    "RAISE EXCEPTION '%', TG_ARGV[0]; END; $$ LANGUAGE plpgsql",
    "CREATE OR REPLACE FUNCTION citelock_require_columns() RETURNS trigger AS $$ DECLARE col text; BEGIN "
    "FOREACH col IN ARRAY TG_ARGV LOOP "
    "IF to_jsonb(NEW) ->> col IS NULL THEN "
    "RAISE EXCEPTION 'citelock table %: column % is required (a writer older than this citelock?)', "
    "TG_TABLE_NAME, col; END IF; END LOOP; RETURN NEW; END; $$ LANGUAGE plpgsql",
]


def refuse_triggers(dialect: str, table: str, verbs: Collection[str], message: str) -> dict[str, str]:
    """Trigger name -> ``CREATE TRIGGER`` statement that makes the database refuse ``verbs`` on ``table``.

    Args:
        dialect: ``sqlite`` or ``postgresql``.
        table: The table.
        verbs: Some of ``insert``, ``update``, ``delete`` (and on PostgreSQL also ``truncate``).
        message: The error the database raises (no single quotes).
    """
    if "'" in message:
        raise ValueError("a trigger message must not contain single quotes")
    if dialect == "postgresql":
        out = {}
        rows = [v for v in verbs if v != "truncate"]
        if rows:
            out[f"{table}_no_{'_'.join(rows)}"] = (
                f"CREATE TRIGGER {table}_no_{'_'.join(rows)} BEFORE {' OR '.join(v.upper() for v in rows)} "
                f"ON {table} FOR EACH ROW EXECUTE FUNCTION citelock_refuse('{message}')"
            )
        if "truncate" in verbs:
            out[f"{table}_no_truncate"] = (
                f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION citelock_refuse('{message}')"
            )
        return out
    return {
        f"{table}_no_{verb}": f"CREATE TRIGGER IF NOT EXISTS {table}_no_{verb} BEFORE {verb.upper()} ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
        for verb in verbs
        if verb != "truncate"
    }


def _append_only(dialect: str, table: str) -> dict[str, str]:
    return refuse_triggers(dialect, table, ("update", "delete", "truncate"), f"citelock table {table} is append-only")


def append_only_triggers(dialect: str, table: str) -> dict[str, str]:
    """Trigger name -> ``CREATE TRIGGER`` statement of the triggers :func:`ensure_tables` gives an append-only table."""
    return _append_only(dialect, table)


def trigger_names(dialect: str, append_only: Collection[str], required: Mapping[str, Collection[str]]) -> set[str]:
    """The names of the triggers :func:`ensure_tables` makes for these ``append_only`` and ``required`` tables."""
    return set(_triggers(dialect, append_only, required))


def disabled_triggers(conn: Connection) -> set[str]:
    """Names of the triggers in the connection's schema that exist but are disabled (PostgreSQL only)."""
    if conn.dialect.name != "postgresql":
        return set()
    query = (
        "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND NOT t.tgisinternal AND t.tgenabled = 'D'"
    )
    return {str(name) for name in conn.execute(text(query)).scalars()}


def _required_trigger(dialect: str, table: str, columns: Collection[str]) -> dict[str, str]:
    name = f"{table}_required"
    if dialect == "postgresql":
        args = ", ".join(f"'{c}'" for c in columns)
        return {
            name: f"CREATE TRIGGER {name} BEFORE INSERT ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION citelock_require_columns({args})"
        }
    condition = " OR ".join(f"NEW.{c} IS NULL" for c in columns)
    message = f"citelock table {table}: columns {', '.join(columns)} are required (a writer older than this citelock?)"
    return {
        name: f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE INSERT ON {table} WHEN {condition} "
        f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
    }


def _triggers(dialect: str, append_only: Collection[str], required: Mapping[str, Collection[str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for table in append_only:
        out.update(_append_only(dialect, table))
    for table, columns in required.items():
        out.update(_required_trigger(dialect, table, columns))
    return out


def existing_tables(conn: Connection) -> set[str]:
    """Names of the tables in the connection's (current) schema."""
    return set(inspect(conn).get_table_names())


def existing_triggers(conn: Connection) -> set[str]:
    """Names of the triggers in the connection's (current) schema."""
    if conn.dialect.name == "postgresql":
        query = (
            "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND NOT t.tgisinternal"
        )
    elif conn.dialect.name == "sqlite":
        query = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
    else:  # pragma: no cover - other dialects get no triggers
        return set()
    return {str(name) for name in conn.execute(text(query)).scalars()}


def _too_narrow(conn: Connection, column: Column[Any], found: Mapping[str, Any]) -> bool:
    """A PostgreSQL ``VARCHAR(n)`` narrower than the table now declares (SQLite does not enforce lengths)."""
    if conn.dialect.name != "postgresql" or not isinstance(column.type, String) or column.type.length is None:
        return False
    length = getattr(found["type"], "length", None)
    return length is not None and int(length) < column.type.length


def _missing(conn: Connection, metadata: MetaData, triggers: Collection[str]) -> list[str]:
    """What the database lacks of ``metadata`` and ``triggers`` (empty: nothing to do)."""
    insp = inspect(conn)
    missing: list[str] = []
    for table in metadata.sorted_tables:
        if not insp.has_table(table.name):
            missing.append(f"table {table.name}")
            continue
        existing = {c["name"]: c for c in insp.get_columns(table.name)}
        for column in table.columns:
            found = existing.get(column.name)
            if found is None:
                missing.append(f"column {table.name}.{column.name}")
            elif _too_narrow(conn, column, found):
                missing.append(f"width {table.name}.{column.name}")
    if conn.dialect.name in ("sqlite", "postgresql"):
        missing.extend(f"trigger {name}" for name in sorted(set(triggers) - existing_triggers(conn)))
    return missing


def _add_columns(conn: Connection, metadata: MetaData) -> None:
    """Add the columns an older version's tables lack (nullable), and widen narrow PostgreSQL strings.

    A column added to an existing table must be declared nullable in the table (its old rows have no value);
    :func:`ensure_tables`' ``required`` makes new inserts set it.
    """
    insp = inspect(conn)
    preparer = conn.dialect.identifier_preparer
    for table in metadata.sorted_tables:
        existing = {c["name"]: c for c in insp.get_columns(table.name)}
        for column in table.columns:
            found = existing.get(column.name)
            type_sql = column.type.compile(dialect=conn.dialect)
            name = preparer.quote(column.name)
            if found is None:  # added nullable: the rows already there have no value for it
                conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {name} {type_sql}"))
            elif _too_narrow(conn, column, found):
                conn.execute(text(f"ALTER TABLE {table.name} ALTER COLUMN {name} TYPE {type_sql}"))


def ensure_tables(
    engine: Engine,
    metadata: MetaData,
    *,
    append_only: Collection[str] = (),
    required: Mapping[str, Collection[str]] | None = None,
    upgrade: Callable[[Connection], None] | None = None,
) -> None:
    """Create or upgrade ``metadata``'s tables so that they are complete, whoever else is doing the same.

    Args:
        engine: The store's engine.
        metadata: The store's tables.
        append_only: Tables whose rows the database must refuse to update or delete.
        required: Table -> columns an ``INSERT`` must set (nullable in the table only because rows written by
            an older version lack them); a trigger refuses an insert that leaves one empty.
        upgrade: Run inside the locked transaction after tables and columns exist and before the triggers are
            made, only when something was missing: copy rows from an older layout, retire its tables
            (:func:`refuse_triggers` works there), for example.

    Raises:
        sqlalchemy.exc.DBAPIError: the database refused the DDL (no rights, disk full) or the lock wait timed out.
    """
    required = dict(required or {})
    names = _triggers(engine.dialect.name, append_only, required)
    with engine.connect() as conn:
        if not _missing(conn, metadata, names):
            return
    with serialized(engine, _DDL_LOCK) as conn:
        if not _missing(conn, metadata, names):
            return  # another process completed the schema while this one waited for the lock
        metadata.create_all(conn, checkfirst=True)
        _add_columns(conn, metadata)
        if engine.dialect.name == "postgresql":
            for statement in _PG_FUNCTIONS:
                conn.execute(text(statement))
        if upgrade is not None:
            upgrade(conn)
        present = existing_triggers(conn)
        for name, statement in names.items():
            if name not in present:
                conn.execute(text(statement))
