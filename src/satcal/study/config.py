"""study.toml: the default instructions of a new study, and the validation every command runs
(against the declarations of :mod:`satcal.settings` and the platforms' own settings)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from .. import settings as settings_model

DEFAULT_INSTRUCTIONS = ("You will see a query and the results of two search systems, A and B. "
                        "{verb} the results of both and tell us whether A gives "
                        "better results, B does, both are equally good, or both are equally bad.")


def default_instructions(documents: pd.DataFrame | None) -> str:
    """The default instructions, in the study's medium: results to listen to when the documents
    table has audio, to read otherwise.

    Parameters
    ----------
    documents : pandas.DataFrame or None
        The study's documents table, or None when the study has none.

    Returns
    -------
    str
        The instructions text, its verb chosen from the documents' columns.
    """
    audio = documents is not None and "audio_url" in documents.columns and (documents["audio_url"] != "").any()
    text = documents is not None and any(c in documents.columns for c in ("title", "snippet", "url"))
    verb = ("Look at and listen to" if text else "Listen to") if audio else "Read"
    return DEFAULT_INSTRUCTIONS.format(verb=verb)

def _platform_schemas() -> dict:
    """``{platform: (Setting, ...)}`` for the platforms with settings of their own."""
    from ..platforms import PLATFORMS
    return {name: p.settings for name, p in PLATFORMS().items() if p.settings}


def validate_config(config: dict, path: Path) -> dict:
    """Check every key of study.toml against its declaration in :mod:`satcal.settings`; one line
    naming the file, the key and what is expected.

    Parameters
    ----------
    config : dict
        study.toml as parsed by :mod:`tomllib`.
    path : pathlib.Path
        The file the configuration came from, named in error messages.

    Returns
    -------
    dict
        The validated configuration.

    Raises
    ------
    SatcalError
        A key is unknown or its value is not what it declares.
    """
    return settings_model.validate_config(config, path, _platform_schemas())
