"""Crowdsourcing platforms: task files out, result files in.

Each platform module declares a :class:`Platform` with a ``write_batch`` function (the files the
platform accepts, plus its task template) and a ``read_results`` function (its result file ->
a tidy table of raw answers). What they share is in :mod:`.base` (items, the key, the HTML a
worker sees) and :mod:`._common` (readers' helpers); this package holds their registry and
re-exports the shared names. The platform modules import :mod:`.base`, never this package, so
the registry can import them without a cycle.
"""
from __future__ import annotations

from ..errors import SatcalError
from .base import (  # noqa: F401 - the package's public names
    ANSWER_LABELS,
    DISPLAY_FIELDS,
    KEY_COLUMNS,
    Platform,
    RAW_ANSWER_COLUMNS,
    SHOWN_CODES,
    Setting,
    TEMPLATES,
    URL_FIELDS,
    build_items,
    check_worker_visible,
    example_digest,
    instruction_paragraphs,
    is_web_url,
    item_view,
    render_form_html,
    render_instructions_html,
    render_lists_html,
    swap_answer,
    template_environment,
)
from .base import __all__ as _base_all

__all__ = list(_base_all) + ["PLATFORMS", "get_platform", "detect_platform"]


def _registry() -> dict[str, Platform]:
    from . import appen, ecir2015, generic, labelstudio, serve, toloka
    return {p.name: p for p in (appen.PLATFORM, toloka.PLATFORM, labelstudio.PLATFORM, generic.PLATFORM,
                                serve.PLATFORM, ecir2015.PLATFORM)}


def detect_platform(path, head: str) -> str:
    """Guess a result file's platform from its name and first line.

    Parameters
    ----------
    path : str or pathlib.Path
        The file's name.
    head : str
        The start of the file, decoded.

    Returns
    -------
    str
        The platform's name; ``"csv"`` when nothing else matches.
    """
    name = str(path).lower()
    # UTF-16 bytes read as UTF-8 show their ASCII letters between NULs, after a BOM's U+FFFD
    head = head.replace("\x00", "").lstrip("\ufeff\ufffd")
    first = head.splitlines()[0] if head.strip() else ""
    if name.endswith(".json"):
        return "labelstudio"
    if "ASSIGNMENT:" in first or "INPUT:" in first:
        return "toloka"
    if "page_token" in first or ("row_id" in first and "seconds" in first and "status" in first):
        return "serve"
    if "_unit_id" in first and "_worker_id" in first:
        return "appen"
    if '"d1A"' in first or ",d1A," in first:
        return "ecir2015"
    if "annotation_id" in first and "annotator" in first:  # Label Studio's CSV / TSV export
        return "labelstudio"
    return "csv"


def PLATFORMS() -> dict[str, Platform]:  # noqa: N802 - a function so the modules load lazily
    return _registry()


def get_platform(name: str) -> Platform:
    """The platform named ``name``.

    Parameters
    ----------
    name : str
        A platform's name.

    Returns
    -------
    Platform

    Raises
    ------
    SatcalError
        An unknown name, or ``mturk`` (closed).
    """
    registry = _registry()
    if name == "mturk":
        raise SatcalError("Amazon Mechanical Turk closed on 2026-09-30; use one of: "
                          + ", ".join(registry))
    try:
        return registry[name]
    except KeyError:
        raise SatcalError(f"unknown platform {name!r}; use one of: {', '.join(registry)}") from None
