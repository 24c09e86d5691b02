"""Reader of the ECIR 2015 published answers file (``crowd.csv``): one answer per example,
already in the example's own orientation, no worker ids and no traps."""
from __future__ import annotations

import pandas as pd

from .base import Platform
from ._common import raw_answers, read_table

#: Items of this reader are example ids, marked so ingest does not look them up in key.csv.
PREFIX = "example:"


def read_results(path) -> pd.DataFrame:
    """The ECIR 2015 answers file (``id``, ``answer``, ``query``, lists) -> raw answers; one
    anonymous worker when it has no ``worker_id``.

    Parameters
    ----------
    path : str or pathlib.Path
        The result file.

    Returns
    -------
    pandas.DataFrame
        Raw answers (:func:`satcal.platforms._common.raw_answers`).

    Raises
    ------
    InputFileError
        The file is not readable in this layout (naming the line).
    """
    t = read_table(path, ",", ["id", "answer", "query", "d1A", "d1B"])
    worker = t["worker_id"] if "worker_id" in t.columns else ["ecir2015-anonymous"] * len(t)
    return raw_answers(path, PREFIX + t["id"].astype(str), worker, t["answer"], None,
                       "ecir2015:" + t["id"].astype(str), None, None, t["__line__"])


def _no_export(*_args, **_kwargs):
    from ..errors import SatcalError
    raise SatcalError("ecir2015 is a result format only; export to appen, toloka, labelstudio or csv")


PLATFORM = Platform("ecir2015", "The ECIR 2015 published answers (read only)", _no_export,
                    read_results, "csv", None)
