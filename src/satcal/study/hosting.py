"""The hosted study run on a study (``satcal serve``): its settings and warnings, the ASGI
application, the server, and the entries that tell other commands a server is running."""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
from contextlib import contextmanager

from ..errors import SatcalError
from ..fileio import atomic_write_text, sha256_file
from .served import _hide_password, _live_servers
from .layout import SERVED_DATABASES, SERVING


#: The event loops and HTTP parsers ``satcal serve`` can run uvicorn with, each with the module it
#: needs; "auto" takes the one in C when installed (the ``serve`` extra), else the pure-Python one.
LOOPS = {"auto": None, "asyncio": None, "uvloop": "uvloop"}
HTTP_PARSERS = {"auto": None, "h11": "h11", "httptools": "httptools"}


def server_stack(loop: str = "auto", http: str = "auto") -> tuple[str, str]:
    """The event loop and HTTP parser uvicorn runs with for ``loop`` and ``http``, "auto"
    resolved as uvicorn resolves it: uvloop and httptools when installed (an accept, a read and a
    parse in C: less CPU a request and a shorter tail, docs/benchmarks.md), asyncio and h11
    otherwise. Refuses, in one line, a named one that is not installed.

    Parameters
    ----------
    loop : {"auto", "asyncio", "uvloop"}, optional
        The event loop (default "auto").
    http : {"auto", "h11", "httptools"}, optional
        The HTTP/1.1 parser (default "auto").

    Returns
    -------
    tuple of (str, str)
        The loop's and the parser's names, e.g. ``("uvloop", "httptools")``.
    """
    if loop not in LOOPS or http not in HTTP_PARSERS:
        raise SatcalError(f"serve: loop must be one of {', '.join(LOOPS)} and http one of {', '.join(HTTP_PARSERS)}; "
                          f"got {loop!r}, {http!r}")

    def installed(name):
        # imported, not only found: a package whose C part does not load (built for another
        # Python) is what uvicorn's auto passes over on ImportError, and what --loop/--http
        # refuse here rather than in a traceback from uvicorn
        if importlib.util.find_spec(name) is None:
            return False
        try:
            importlib.import_module(name)
        except ImportError:
            return False
        return True

    for name in (loop, http):
        if name in ("uvloop", "httptools") and not installed(name):
            raise SatcalError(f"serve: {name} is not installed (pip install 'satcal[serve]'), or leave it to auto")
    if loop == "auto":
        loop = "uvloop" if installed("uvloop") else "asyncio"
    if http == "auto":
        http = "httptools" if installed("httptools") else "h11"
    return loop, http


class Hosting:
    """serve of a :class:`~satcal.study.Study` (a part of it)."""

    @contextmanager
    def serving(self, url: str | None):
        """While the block runs, ``batches/serving.json`` names this process and its database, so
        commands that would replace the key refuse (:func:`running_server`). The entry is taken
        off at the end; a process ended by a signal (uvicorn re-raises SIGTERM after its
        shutdown) or killed leaves it behind, and an entry whose process is gone never counts.

        Parameters
        ----------
        url : str or None
            The database URL; None means ``DIR/serve.db``.
        """
        from ..serve import db
        shown = _hide_password(url or db.default_url(self.path))
        marker = self.path / SERVING
        me = {"pid": os.getpid(), "database": shown}
        with self.locked():
            atomic_write_text(marker, json.dumps(_live_servers(self.path) + [me], indent=1) + "\n")
        try:
            yield
        finally:
            with self.locked():
                rest = [e for e in _live_servers(self.path) if e.get("pid") != me["pid"]]
                if rest:
                    atomic_write_text(marker, json.dumps(rest, indent=1) + "\n")
                elif marker.exists():
                    marker.unlink()

    def remember_database(self, url: str | None) -> None:
        """Note a study database ``satcal serve`` uses (a URL's password left out), so that
        commands that would replace the key it is bound to can look for answers in it.

        Parameters
        ----------
        url : str or None
            The database URL; None means ``DIR/serve.db``.
        """
        from ..serve import db
        url = url or db.default_url(self.path)
        path = self.path / SERVED_DATABASES
        with self.locked():
            known = json.loads(path.read_text()) if path.exists() else []
            shown = _hide_password(url)
            if shown not in known:
                atomic_write_text(path, json.dumps(known + [shown], indent=1) + "\n")

    def serve_settings(self):
        """What the hosted study reads of study.toml (:class:`~satcal.serve.ServeSettings`)."""
        from ..serve.study import ServeSettings
        return ServeSettings.from_settings(self.settings)

    def serve_screening(self) -> tuple[str, list[str]]:
        """How the hosted study of the exported batch screens participants (one line: traps each
        meets, attention checks), and why it cannot score every participant as asked."""
        from ..serve.study import batch_screening
        return batch_screening(self.table("items.csv"), self.table("key.csv"), self.serve_settings())

    def hosted_study(self, url: str | None = None):
        """The hosted study of the exported batch, its answers in the database at ``url``
        (default ``DIR/serve.db``).

        Parameters
        ----------
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.

        Returns
        -------
        satcal.serve.HostedStudy
        """
        from ..serve import HostedStudy, db
        items = self.table("items.csv")
        key = self.table("key.csv")  # refuses with "run satcal export first" when missing
        study = HostedStudy.from_batch(items, key, self.serve_settings(), db.connect(url or db.default_url(self.path)),
                                       sha256_file(self.file("key.csv")))
        from ..adaptive_study import attach
        attach(self, study)  # adaptive: pages in the criterion's order, refitted in the background
        return study

    def serve_app(self, url: str | None = None, https_only: bool = False):
        """The ASGI application of the hosted study (Starlette).

        Parameters
        ----------
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.
        https_only : bool, optional
            Send cookies over HTTPS only (default False).
        """
        from ..serve import create_app
        return create_app(self.hosted_study(url), https_only=https_only)

    def run_server(self, study, host: str, port: int, url: str | None = None, workers: int = 1,
                   https_only: bool = False, loop: str = "auto", http: str = "auto") -> None:
        """Serve ``study`` (:meth:`hosted_study`) with uvicorn until stopped; several worker
        processes each build their own from this directory (:func:`served_app`).

        Parameters
        ----------
        study : satcal.serve.HostedStudy
            The hosted study (used when ``workers`` is 1).
        host : str
            Address to listen on.
        port : int
            Port to listen on.
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.
        workers : int, optional
            Number of server processes (default 1).
        https_only : bool, optional
            Send cookies over HTTPS only (default False).
        loop : {"auto", "asyncio", "uvloop"}, optional
            uvicorn's event loop (default "auto": uvloop when installed; :func:`server_stack`).
        http : {"auto", "h11", "httptools"}, optional
            uvicorn's HTTP parser (default "auto": httptools when installed).
        """
        import uvicorn
        loop, http = server_stack(loop, http)  # named, so what was said at start is what runs
        from ..serve import create_app
        if workers == 1:
            uvicorn.run(create_app(study, https_only=https_only), host=host, port=port, log_level="warning",
                        proxy_headers=True, server_header=False, loop=loop, http=http)
            return
        study.engine.dispose()
        os.environ.update({"SATCAL_SERVE_DIR": str(self.path.resolve()), "SATCAL_SERVE_DB": url or "",
                           "SATCAL_SERVE_HTTPS_ONLY": "1" if https_only else "0"})
        uvicorn.run("satcal.study:served_app", factory=True, host=host, port=port, workers=workers,
                    log_level="warning", proxy_headers=True, server_header=False, loop=loop, http=http)
