"""The hosted study (``satcal serve``): the workspace's batch served as HTML forms to Prolific
and lab participants, answers kept in a database (SQLite by default, PostgreSQL by URL), read
back by ``satcal ingest DIR --platform serve``.

Modules: ``db`` (schema, migrations, slot claims, the snapshot ingest reads), ``study`` (what
happens for a participant, apart from HTTP), ``routes`` (the endpoints), ``app`` (the Starlette
application factory), ``client``
(a participant without JavaScript: the simulated crowd's and the load benchmark's driver).
"""
from .study import HostedStudy, ServeSettings

__all__ = ["HostedStudy", "ServeSettings", "create_app"]


def create_app(study, **kwargs):
    """The ASGI application serving ``study`` (see :func:`satcal.serve.app.create_app`).

    Parameters
    ----------
    study : satcal.serve.HostedStudy
        The hosted study.
    **kwargs
        Passed to :func:`satcal.serve.app.create_app`.

    Returns
    -------
    starlette.applications.Starlette
    """
    from .app import create_app as build
    return build(study, **kwargs)
