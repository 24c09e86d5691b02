"""Worker quality: trust from traps, exclusion, and optional Dawid-Skene worker models.

Trust is the share of traps a worker answered correctly, once they have answered at least
``min_traps`` traps; otherwise the platform's own trust where it gives one (Appen's
``_trust``); otherwise unknown (kept, and flagged). Workers under the threshold are excluded.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import SatcalError

__all__ = ["worker_table", "dawid_skene"]


def worker_table(answers: pd.DataFrame, threshold: float = 0.7, min_traps: int = 1) -> pd.DataFrame:
    """One row per worker: answers, traps seen / correct, trust and its source, exclusion.

    ``answers`` needs ``worker_id, is_trap, correct`` and optionally ``trust`` (platform trust).
    """
    if not 0 <= threshold <= 1:
        raise SatcalError(f"the trust threshold must be in [0, 1], got {threshold}")
    a = answers.copy()
    a["is_trap"] = a["is_trap"].astype(bool)
    a["trap_correct"] = a["is_trap"] & a["correct"].astype(bool)
    if "trust" not in a.columns:
        a["trust"] = np.nan
    g = a.groupby("worker_id", sort=True)
    table = pd.DataFrame({
        "answers": g.size(),
        "examples_answered": g["is_trap"].apply(lambda s: int((~s).sum())),
        "traps_seen": g["is_trap"].sum().astype(int),
        "traps_correct": g["trap_correct"].sum().astype(int),
        "platform_trust": g["trust"].apply(lambda s: pd.to_numeric(s, errors="coerce").dropna().mean()
                                           if pd.to_numeric(s, errors="coerce").notna().any() else np.nan),
    })
    enough = table["traps_seen"] >= max(min_traps, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        trap_trust = table["traps_correct"] / table["traps_seen"].where(table["traps_seen"] > 0)
    table["trust"] = np.where(enough, trap_trust, table["platform_trust"])
    table["trust_source"] = np.where(enough, "traps",
                                     np.where(table["platform_trust"].notna(), "platform", "none"))
    table["excluded"] = table["trust"].notna() & (table["trust"] < threshold)
    table["reason"] = np.where(
        table["excluded"],
        [f"trust {t:.2f} < {threshold:.2f} ({s})" for t, s in zip(table["trust"], table["trust_source"])],
        np.where(table["trust_source"] == "none", "no traps seen: trust unknown, kept", ""))
    return table.reset_index()


def require_crowdkit():
    """The optional crowd-kit package, or a one-line error saying how to install it."""
    try:
        from crowdkit.aggregation import DawidSkene
    except ImportError:
        raise SatcalError("Dawid-Skene needs the optional crowd-kit package: "
                          "pip install 'satcal[crowd]'") from None
    return DawidSkene


def dawid_skene(answers: pd.DataFrame, n_iter: int = 100) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Dawid-Skene worker models (crowd-kit, an optional extra).

    Returns the aggregated label of each example and each worker's estimated accuracy (the
    trace of their confusion matrix weighted by the label priors).
    """
    DawidSkene = require_crowdkit()
    data = answers.rename(columns={"example_id": "task", "worker_id": "worker", "answer": "label"})
    ds = DawidSkene(n_iter=n_iter).fit(data[["task", "worker", "label"]])
    labels = ds.labels_.rename("label").reset_index()
    errors = ds.errors_
    priors = ds.priors_
    acc = {}
    for worker in errors.index.get_level_values(0).unique():
        m = errors.loc[worker]
        acc[worker] = float(sum(priors.get(c, 0) * m.loc[c, c] for c in m.columns if c in m.index))
    return labels, pd.DataFrame({"worker_id": list(acc), "ds_accuracy": list(acc.values())})
