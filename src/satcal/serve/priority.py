"""The order in which an adaptive hosted study hands out its pages, and when it stops.

A refit (the answers so far, the design criterion, the stopping rule: whatever the caller
passes in, since the serve layer knows nothing of the analysis) runs in a background thread at
most every ``interval`` seconds and publishes a :class:`Plan`. A participant's claim reads the
latest plan without waiting for a refit: a claim costs what it costs in a fixed study, whatever
the refit costs. A refit that fails is logged and the previous plan stays.
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Callable, Mapping

__all__ = ["Plan", "PageOrder"]

log = logging.getLogger("satcal.serve")


@dataclass(frozen=True)
class Plan:
    """One refit's outcome: a priority per page (higher is handed out sooner; a page not named
    comes after every named one) and whether the study is closed (settled, or at its budget),
    with the reason in words.

    Attributes
    ----------
    priorities : mapping of int to float
        ``{page number: priority}``; higher is handed out sooner, an unnamed page after every
        named one.
    closed : bool
        The study is settled or at its budget: no further page is handed out.
    reason : str
        Why it is closed, in words ("" while open).
    """

    priorities: Mapping[int, float] = field(default_factory=dict)
    closed: bool = False
    reason: str = ""

    def ranks(self) -> dict[int, int]:
        """Page -> rank (0 first): by priority, highest first, ties by page number."""
        order = sorted(self.priorities, key=lambda p: (-float(self.priorities[p]), int(p)))
        return {int(p): i for i, p in enumerate(order)}


class PageOrder:
    """The latest :class:`Plan` of a study, refreshed by ``refit`` in a background thread.

    Parameters
    ----------
    refit : callable
        ``refit() -> Plan``, called with no argument from the background thread.
    interval : float
        Seconds between the starts of two refits (at least; a refit longer than that is
        followed by the next at once).
    """

    def __init__(self, refit: Callable[[], Plan], interval: float = 5.0):
        self.refit = refit
        self.interval = float(interval)
        self._plan = Plan()
        self._expression = None  # (plan, column, SQL rank expression, dialect) of the latest plan
        self._blob = None  # (plan, its rank_blob) of the latest plan
        self.refits = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def plan(self) -> Plan:
        return self._plan  # one reference read: a claim never waits for a refit

    @property
    def closed(self) -> bool:
        return self._plan.closed

    def status(self) -> dict:
        """For the researcher's status page: refits made and failed, and the latest plan's
        verdict."""
        return {"refits": self.refits, "failures": self.failures, "closed": self._plan.closed,
                "reason": self._plan.reason, "interval_seconds": self.interval}

    def refresh(self) -> bool:
        """Run one refit and publish its plan; False (old plan kept, failure logged) if it
        raised or returned something else than a :class:`Plan`."""
        try:
            plan = self.refit()
            if not isinstance(plan, Plan):
                raise TypeError(f"the refit returned {type(plan).__name__}, not a Plan")
        except Exception:  # a refit must never take the server down: keep serving the old plan
            self.failures += 1
            log.exception("satcal serve: the adaptive refit failed; the previous page order stays")
            return False
        self._plan = plan
        self.refits += 1
        return True

    def rank_expression(self, column, dialect: str = "sqlite"):
        """A SQL expression of ``column`` (a page number) giving its place in the latest plan
        (pages the plan does not name after the others), built once per plan.

        SQLite: the plan is one bound BLOB of 4 bytes a page number, page ``p``'s rank
        big-endian at byte ``4 p`` (``ff ff ff ff`` for a page the plan does not name), and a
        page's place is ``substr(blob, 4 p + 1, 4)``: a BLOB's ``substr`` is an offset, so a
        row costs the same whatever the plan's length, and big-endian bytes sort as their
        numbers. It replaced a string search (``instr(",12,3,7,", ",<page>,")``), whose cost
        grew with the plan: 1.7 ms of CPU a claim on 704 pages against 0.01 ms in page order,
        in the writers' turn (docs/benchmarks.md, "A page submission's CPU"); a CASE of one
        branch a page was slower still. PostgreSQL keeps the string search (``strpos``).

        Parameters
        ----------
        column : sqlalchemy column
            The page number column.
        dialect : str, optional
            ``"sqlite"`` (default) or ``"postgresql"``.
        """
        plan, cached = self._plan, self._expression
        if cached is not None and cached[0] is plan and cached[1] is column and cached[3] == dialect:
            return cached[2]
        from sqlalchemy import String, cast, func, literal
        ranks = plan.ranks()
        if not ranks:
            expression = literal(0)
        elif dialect == "postgresql":
            ranked = "," + ",".join(str(p) for p in sorted(ranks, key=ranks.get)) + ","
            needle = literal(",") + cast(column, String) + literal(",")
            expression = func.coalesce(func.nullif(func.strpos(literal(ranked), needle), 0), len(ranked) + 1)
        else:
            from sqlalchemy import LargeBinary
            expression = blob_rank(column, literal(rank_blob(ranks), LargeBinary))
        self._expression = (plan, column, expression, dialect)
        return expression

    def rank_blob(self) -> bytes | None:
        """The latest plan's ranks as SQLite's claim binds them (:func:`rank_blob`), computed
        once per plan; None when the plan ranks no page (pages go in page order)."""
        plan, cached = self._plan, self._blob
        if cached is not None and cached[0] is plan:
            return cached[1]
        ranks = plan.ranks()
        blob = rank_blob(ranks) if ranks else None
        self._blob = (plan, blob)
        return blob

    # -- the background thread -------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.refresh()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="satcal-adaptive-refit", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the refit thread, waiting up to ``timeout`` seconds for it.

        Parameters
        ----------
        timeout : float or None, optional
            None (default) waits until it ends.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @asynccontextmanager
    async def lifespan(self, app):
        """Starlette's lifespan: refit while the server runs."""
        self.start()
        try:
            yield
        finally:
            self.stop(timeout=1.0)


def rank_blob(ranks: Mapping[int, int]) -> bytes:
    """A plan's ranks as SQLite's rank expression reads them (:func:`blob_rank`): 4 big-endian
    bytes a page number, page ``p``'s rank at byte ``4 p``, ``ff`` x 4 (after every rank) for a
    page not ranked.

    Parameters
    ----------
    ranks : mapping of int to int
        Page -> rank (:meth:`Plan.ranks`), page numbers not negative.
    """
    import numpy as np
    pages = np.fromiter(ranks.keys(), dtype=np.int64, count=len(ranks))
    if pages.size and pages.min() < 0:
        raise ValueError("a plan's page numbers are not negative")
    table = np.full(int(pages.max()) + 1 if pages.size else 0, 0xFFFFFFFF, dtype=">u4")
    table[pages] = np.fromiter(ranks.values(), dtype=np.int64, count=len(ranks))
    return table.tobytes()


def blob_rank(column, ranks):
    """SQLite's rank expression of a page-number ``column`` (:meth:`PageOrder.rank_expression`)
    against ``ranks``, a BLOB of :func:`rank_blob` (a literal, or a ``bindparam`` filled in at
    each claim): ``substr(ranks, 4 * page + 1, 4)``, ``ff`` x 4 past the BLOB's end (where
    ``substr`` gives an empty BLOB).

    Parameters
    ----------
    column : sqlalchemy column
        The page number column.
    ranks : sqlalchemy expression
        The BLOB.
    """
    from sqlalchemy import LargeBinary, func, literal
    place = func.substr(ranks, column * 4 + 1, 4)
    return func.coalesce(func.nullif(place, literal(b"", LargeBinary)), literal(b"\xff\xff\xff\xff", LargeBinary))
