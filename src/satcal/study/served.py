"""The hosted studies a study directory records (``batches/serving.json``, the databases
``satcal serve`` used), and the answers they hold that are not ingested yet."""
from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import SatcalError
from ..fileio import sha256_file
from .layout import SERVED_DATABASES, SERVING


def _alive(pid: int) -> bool:
    try:
        os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # it exists, under another user
        pass
    return True


def _live_servers(path: Path) -> list[dict]:
    """The entries of ``batches/serving.json`` whose process still runs (a killed server's
    entry stays behind and is ignored)."""
    marker = Path(path) / SERVING
    try:
        entries = json.loads(marker.read_text()) if marker.exists() else []
    except (OSError, ValueError):
        return []
    return [e for e in entries if _alive(e.get("pid", -1))]


def running_server(path: Path) -> dict | None:
    """A ``satcal serve`` still running on the study at ``path``, or None.

    Parameters
    ----------
    path : pathlib.Path
        The study directory.

    Returns
    -------
    dict or None
        The entry of ``batches/serving.json`` (``pid``, ``database``) of a live process.
    """
    return next(iter(_live_servers(path)), None)


def _refuse_while_served(path: Path, command: str) -> None:
    """Replacing the key under a running hosted study would orphan every answer stored after
    it (they are bound to the old key): refuse until the server is stopped."""
    live = running_server(path)
    if live is not None:
        raise SatcalError(f"satcal serve is running on {path} (process {live['pid']}, database "
                          f"{live['database']}); {command} would replace the key its participants are "
                          "answering, even with --force. Stop the server first, then ingest its answers "
                          f"({_ingest_served(Path(path), live['database'])})")


def _hide_password(url: str) -> str:
    from sqlalchemy.engine import make_url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: kept as given (connect() will say why)
        return url


def _ingest_served(path: Path, url: str) -> str:
    from ..serve import db
    own = url == _hide_password(db.default_url(path))
    return f"satcal ingest {path} --platform serve" + ("" if own else f" --db {url}")


def served_answers(path: Path) -> tuple[str, int] | None:
    """The first study database of the workspace at ``path`` (``DIR/serve.db`` and those
    ``satcal serve`` noted) that holds answers to the current key.csv, with their number;
    None if none does. Answers to another key are not counted: that key is kept under
    batches/keys/ (an earlier batch) or was never served.

    Parameters
    ----------
    path : pathlib.Path
        The study directory.

    Returns
    -------
    tuple of (str, int) or None
        The database URL (password hidden) and its number of answers.
    """
    key = path / "key.csv"
    if not key.exists():
        return None
    from ..serve import db
    urls = [db.default_url(path)]
    noted = path / SERVED_DATABASES
    if noted.exists():
        urls += [u for u in json.loads(noted.read_text()) if u not in urls]
    digest = sha256_file(key)
    for url in urls:
        n = _responses_to(url, digest)
        if n:
            return _hide_password(url), n
    return None


def _responses_to(url: str, digest: str) -> int:
    """Item responses stored in the database at ``url`` while it was bound to the key of hash
    ``digest`` (0 for a missing SQLite file or a database of another key)."""
    from sqlalchemy import func, inspect, select
    from sqlalchemy.exc import SQLAlchemyError
    from ..serve import db
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        return 0
    engine = db.connect(url)
    try:
        if not inspect(engine).has_table("satcal_meta"):
            return 0
        t = db.tables()
        with engine.connect() as conn:
            bound = conn.execute(select(t["meta"].c.value).where(t["meta"].c.name == "key_sha256")).scalar()
            if bound != digest:
                return 0
            return int(conn.execute(select(func.count()).select_from(t["responses"])
                                    .where(t["responses"].c.kind == "item")).scalar_one())
    except SQLAlchemyError as exc:
        what = (f"if it is gone, remove it from {SERVED_DATABASES}" if not url.startswith("sqlite:///")
                else "if it is not a study database, move it away")
        raise SatcalError(f"{_hide_password(url)}: cannot read this study database to look for answers "
                          f"({str(getattr(exc, 'orig', exc)).strip()}); ingest its answers first, or, {what}") from None
    finally:
        engine.dispose()
