"""Calibrated evaluation of systems: from DCG to expected user satisfaction (paper 003, sec. 5).

For each system and query, phi under a chosen formulation (study ``max`` normalisation) and
the expected satisfaction P(Sat|phi) from a calibration's fitted curve; per system, the mean
expected satisfaction with a t interval over queries; for each pair of systems, the expected
share of queries on which users prefer either one:

    P(users prefer s1 on q) = P(Pref | |dphi_q|) if dphi_q > 0 else 0,   dphi_q = phi_1 - phi_2

and likewise for s2; the rest is the share on which users do not side with either.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

from ..errors import SatcalError
from ..judgments import Judgments
from ..measures import formulation as parse_formulation
from ..measures import score_lists
from ..runs import Runs, level_cube
from .core import TIE_TOLERANCE, design

__all__ = ["Calibration", "load_calibration", "evaluate_runs", "EvaluationResult"]


@dataclass
class Calibration:
    """Fitted curves of one formulation: beta of P(Sat|phi) and of P(Pref||dphi|)."""

    formulation: str
    sat: np.ndarray
    pref: np.ndarray

    def p_sat(self, phi):
        return expit(design(np.asarray(phi, float)) @ self.sat)

    def p_pref(self, dphi):
        return expit(design(np.abs(np.asarray(dphi, float))) @ self.pref)


def load_calibration(directory, formulation: str = "lin-const") -> Calibration:
    """Read ``fits.csv`` of an analysis directory (or of a workspace's ``analysis/``)."""
    d = Path(directory)
    path = d / "fits.csv" if (d / "fits.csv").exists() else d / "analysis" / "fits.csv"
    if not path.exists():
        raise SatcalError(f"{d}: no fits.csv; give the output directory of satcal analyze")
    fits = pd.read_csv(path)
    rows = fits[fits["formulation"] == formulation].set_index("curve")
    if not {"sat", "pref"} <= set(rows.index):
        raise SatcalError(f"{path}: no fits for formulation {formulation!r}; it has "
                          f"{', '.join(sorted(fits['formulation'].unique())[:6])} ...")
    beta = lambda c: rows.loc[c, ["beta0", "beta1", "beta2"]].to_numpy(float)
    return Calibration(formulation, beta("sat"), beta("pref"))


@dataclass
class EvaluationResult:
    per_query: pd.DataFrame
    per_system: pd.DataFrame
    pairs: pd.DataFrame
    formulation: str

    def save(self, out_dir) -> dict[str, str]:
        from ..fileio import atomic_write_text, save_figure
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = {}
        for name in ("per_query", "per_system", "pairs"):
            path = out / f"evaluation_{name}.csv"
            atomic_write_text(path, getattr(self, name).to_csv(index=False, lineterminator="\n",
                                                               float_format="%.10g"))
            written[name] = str(path)
        png, pdf = save_figure(self.figure(), out / "evaluation")
        written["figure"] = str(png)
        return written

    def figure(self):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        s = self.per_system.sort_values("expected_sat")
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(s) + 1.5))
        err = np.vstack([s["expected_sat"] - s["sat_lo"], s["sat_hi"] - s["expected_sat"]])
        ax.errorbar(s["expected_sat"], np.arange(len(s)), xerr=err, fmt="o", color="k", capsize=3)
        ax.scatter(s["mean_phi"], np.arange(len(s)), marker="|", s=120, color="C1", label="mean phi")
        ax.set_yticks(np.arange(len(s)), s["system"])
        ax.set_xlim(0, 1)
        ax.set_xlabel(f"expected P(Sat) per query ({self.formulation}; 95% interval over queries)")
        ax.legend(loc="lower right")
        ax.grid(axis="x", alpha=0.3)
        fig.tight_layout()
        return fig


def evaluate_runs(judgments: Judgments, runs: Runs, calibration: Calibration, k: int = 5,
                  top_level: int | None = None) -> EvaluationResult:
    """Expected satisfaction of every system and preference between every pair (see module)."""
    f = parse_formulation(calibration.formulation)
    cube, systems, queries = level_cube(runs, judgments, k)
    top = judgments.top_level if top_level is None else top_level
    phi = score_lists(cube.reshape(-1, k), [f], top_level=top)[:, 0].reshape(len(systems), len(queries))
    p_sat = calibration.p_sat(phi)
    per_query = pd.DataFrame({"system": np.repeat(systems, len(queries)), "query": np.tile(queries, len(systems)),
                              "phi": phi.ravel(), "p_sat": p_sat.ravel()})
    n = len(queries)
    mean = p_sat.mean(axis=1)
    sd = p_sat.std(axis=1, ddof=1) if n > 1 else np.zeros(len(systems))
    from scipy.stats import t as student_t
    half = student_t.ppf(0.975, max(n - 1, 1)) * sd / np.sqrt(n) if n > 1 else np.full(len(systems), np.nan)
    per_system = pd.DataFrame({"system": systems, "queries": n, "mean_phi": phi.mean(axis=1),
                               "expected_sat": mean, "sat_lo": mean - half, "sat_hi": mean + half})
    rows = []
    for i, j in combinations(range(len(systems)), 2):
        d = phi[i] - phi[j]
        d = np.where(np.abs(d) < TIE_TOLERANCE, 0.0, d)
        pref = calibration.p_pref(d)
        p1 = np.where(d > 0, pref, 0.0).mean()
        p2 = np.where(d < 0, pref, 0.0).mean()
        rows.append({"system_1": systems[i], "system_2": systems[j], "mean_dphi": d.mean(),
                     "queries_1_higher": int((d > 0).sum()), "queries_2_higher": int((d < 0).sum()),
                     "p_prefer_1": p1, "p_prefer_2": p2, "p_undecided": 1 - p1 - p2})
    return EvaluationResult(per_query, per_system.sort_values("expected_sat", ascending=False).reset_index(drop=True),
                            pd.DataFrame(rows), calibration.formulation)
