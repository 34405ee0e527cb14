"""Querysets whose SQL is compiled once per thread (a gunicorn worker: once), not once per request.

The status facts (CheckpointQuerySet.with_status_facts: nine correlated subqueries and two cases)
cost the ORM about 6 ms to build and compile, against 2 ms for PostgreSQL to run them, and the
query page, its health panel, every chart, the list and /metrics each asked for them on every
request. The SQL never changes between requests: only the checkpoint's id does. So a
PrecompiledValues compiles its queryset the first time a thread asks, with a sentinel
in place of the id, and afterwards runs that SQL with the id put where the sentinel was, its rows
turned into values() dicts by the same compiler (its converters: SQLite's datetimes and UUIDs).
What it returns is what the queryset's values() returns; tests/dashboards/test_precompiled.py
holds the two side by side on both databases.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.utils import CursorWrapper
from django.db.models import QuerySet

# Stands for the argument while the queryset is compiled: no checkpoint has this id, and the
# compiled parameters are searched for it to know where the argument goes.
ARGUMENT_SENTINEL = -7_318_264_519_062
# Every PrecompiledValues made, in the order their modules were imported: a fresh web worker
# compiles and runs them all once before its first request (ckptweb/warm_up.py).
REGISTERED: list[PrecompiledValues] = []


class CompiledQuery:
    """One queryset's SQL, its parameters, the compiler that turns its rows into values, and names."""

    def __init__(self, queryset: QuerySet, *, takes_argument: bool) -> None:
        self.compiler = queryset.query.get_compiler(queryset.db)
        self.sql, params = self.compiler.as_sql()
        self.params = tuple(params)
        query = queryset.query  # the names as ValuesIterable takes them
        self.names = (
            list(query.selected)
            if query.selected
            else [*query.extra_select, *query.values_select, *query.annotation_select]
        )
        self.argument_at = [index for index, param in enumerate(self.params) if param == ARGUMENT_SENTINEL]
        if takes_argument and len(self.argument_at) != 1:
            raise ValueError(f"the argument appears {len(self.argument_at)} times in the compiled parameters, not once")

    def rows(self, argument: Any = None) -> list[dict[str, Any]]:
        params = list(self.params)
        for index in self.argument_at:
            params[index] = argument
        with self.compiler.connection.cursor() as cursor:
            read_timestamps_in_c(cursor)
            cursor.execute(self.sql, params)
            fetched = cursor.fetchall()
        indexes = range(len(self.names))
        return [{self.names[i]: row[i] for i in indexes} for row in self.compiler.results_iter(results=[fetched])]


def read_timestamps_in_c(cursor: CursorWrapper) -> None:
    """On PostgreSQL, read this cursor's timestamptz values with psycopg's own loader (in C with
    psycopg[binary]) rather than the one Django registers on each connection, a Python subclass of
    psycopg's Python loader that sets Django's time zone on each value: about 4 µs a value, and the
    list's 1,000 rows hold 4,000 (13 of the 70 ms it cost a request, docs/benchmarks.md). psycopg's
    loader gives the value in the session's time zone, which Django sets to its own when it connects
    (DatabaseWrapper.ensure_timezone): the same datetimes, the same tzinfo."""
    if cursor.db.vendor == "postgresql":
        cursor.cursor.adapters.register_loader(*_psycopg_timestamptz_loader())


@functools.cache
def _psycopg_timestamptz_loader() -> tuple[int, type]:
    """The timestamptz type's oid and psycopg's own loader of its text, looked up once."""
    from psycopg import postgres
    from psycopg.pq import Format

    timestamptz = postgres.types["timestamptz"].oid
    return timestamptz, postgres.adapters.get_loader(timestamptz, Format.TEXT)


class PrecompiledValues:
    """The rows of ``build(argument)``, a values() queryset, compiled once per thread and database.

    ``build`` is called with ARGUMENT_SENTINEL (or with nothing, for a queryset of no argument) the
    first time a thread asks. Django's connections are per thread, and so is what is compiled for
    one (the compiler holds it): it goes with its thread, so a server that starts a thread per
    request keeps nothing, and a gunicorn worker compiles once.
    """

    def __init__(self, build: Callable[..., QuerySet], *, takes_argument: bool = True) -> None:
        self._build = build
        self._takes_argument = takes_argument
        self._per_thread = threading.local()
        REGISTERED.append(self)

    def rows(self, argument: Any = None, *, using: str = DEFAULT_DB_ALIAS) -> list[dict[str, Any]]:
        return self._compiled_for(using).rows(argument)

    def warm_up(self, argument: Any) -> None:
        """Compile the SQL and run it once (``argument`` where it takes one), for what it costs first:
        the ORM's compiling and the database backend's reading of the tables' catalogs."""
        self.rows(argument if self._takes_argument else None)

    def _compiled_for(self, using: str) -> CompiledQuery:
        compiled_of = self._per_thread.__dict__.setdefault("compiled", {})
        compiled = compiled_of.get(using)
        if compiled is None or compiled.compiler.connection is not connections[using]:
            queryset = self._build(ARGUMENT_SENTINEL) if self._takes_argument else self._build()
            compiled = compiled_of[using] = CompiledQuery(queryset.using(using), takes_argument=self._takes_argument)
        return compiled
