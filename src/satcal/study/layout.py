"""The names of a study directory's files that more than one part of the study reads."""
from __future__ import annotations

from pathlib import Path

#: What generate records of the design its examples were made under.
DESIGN_FILE = "design.json"
#: The tables made under one k and one set of levels.
DESIGN_TABLES = ("examples.csv", "scores.csv", "traps.csv", "items.csv", "key.csv", "answers.csv")

#: The study databases ``satcal serve`` used, besides the default DIR/serve.db.
SERVED_DATABASES = "batches/served-databases.json"
#: The ``satcal serve`` processes running on the study now (pid, database), one entry each.
SERVING = "batches/serving.json"


def analysis_directory(path) -> Path:
    """Where ``satcal analyze`` wrote its outputs: ``path`` itself, or a study directory's
    ``analysis/`` when ``path`` holds a study.toml (so ``evaluate`` and ``reliability
    --calibration`` take either).

    Parameters
    ----------
    path : str or pathlib.Path
        An analysis directory or a study directory.

    Returns
    -------
    pathlib.Path
    """
    path = Path(path)
    return path / "analysis" if (path / "study.toml").is_file() else path
