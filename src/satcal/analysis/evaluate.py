"""Calibrated evaluation of systems: from DCG to expected user satisfaction (Urbano and Marrero, ECIR 2015, sec. 5).

For each system and query, phi under each calibrated formulation or measure (DCG family, RBP,
ERR, RR, AP, P) and the expected satisfaction from its fitted curve: the standardised s*_f(phi)
(and preference curve P*_f) when the analysis computed them (the satisfaction of a list with
score phi averaged over the reference population of lists, whatever design the study used), else
the per-list s(phi) of the joint model, else the paper's P(Sat|phi); so systems
scored by different measures are compared on one scale; per system, the mean
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

from .._results import ResultTables
from ..errors import SatcalError
from ..judgments import Judgments
from ..measures import formulation as parse_formulation
from ..measures import score_lists
from ..runs import Runs, level_cube
from .core import TIE_TOLERANCE, design

__all__ = ["Calibration", "load_calibration", "load_calibrations", "evaluate_runs", "EvaluationResult"]


@dataclass
class Calibration:
    """Fitted curves of one formulation, and the scale they were fitted on.

    Parameters
    ----------
    formulation : str
        The calibrated measure's id (e.g. ``"exp2-log2"``).
    sat, pref : numpy.ndarray
        beta of P(Sat|phi) and of P(Pref||dphi|) (quadratic logit).
    normalization, negatives : str
        The formulation's normalisation and negative-level policy.
    k, levels : int, optional
        The list length and number of levels fitted on (from ``calibration.json``).
    sat_monotone, pref_monotone : tuple, optional
        ``(grid, p)``: the isotonic curve, used when the quadratic logit decreases somewhere
        on [0, 1].
    sat_model : str
        ``published`` (the paper's P(Sat|phi)), ``joint`` (the per-list s(phi)) or
        ``standardised`` (s*_f(phi), and ``pref`` is P*_f).
    """

    formulation: str
    sat: np.ndarray
    pref: np.ndarray
    normalization: str = "max"
    negatives: str = "keep"
    k: int | None = None
    levels: int | None = None
    sat_monotone: tuple | None = None    # (grid, p): the isotonic curve, used when the
    pref_monotone: tuple | None = None   # quadratic logit decreases somewhere on [0, 1]
    sat_model: str = "published"         # "joint": the per-list s(phi); "standardised": s*, P*

    def p_sat(self, phi):
        """Expected satisfaction at scores ``phi``.

        Parameters
        ----------
        phi : array-like of float

        Returns
        -------
        numpy.ndarray of float
        """
        if self.sat_monotone is not None:
            return np.interp(np.asarray(phi, float), *self.sat_monotone)
        return expit(design(np.asarray(phi, float)) @ self.sat)

    def p_pref(self, dphi):
        """Probability that users agree with a difference ``dphi`` (its absolute value).

        Parameters
        ----------
        dphi : array-like of float

        Returns
        -------
        numpy.ndarray of float
        """
        if self.pref_monotone is not None:
            return np.interp(np.abs(np.asarray(dphi, float)), *self.pref_monotone)
        return expit(design(np.abs(np.asarray(dphi, float))) @ self.pref)


def _fits_path(directory) -> Path:
    d = Path(directory)
    path = d / "fits.csv"
    if not path.exists():
        raise SatcalError(f"{d}: no fits.csv; give the output directory of satcal analyze "
                          "(a study's is its analysis/)")
    return path


def load_calibration(directory, formulation: str = "lin-const") -> Calibration:
    """Read one formulation's curves from ``fits.csv`` of an analysis directory (a study's is
    its ``analysis/``).

    Parameters
    ----------
    directory : path-like
    formulation : str, default ``"lin-const"``

    Returns
    -------
    Calibration
    """
    return load_calibrations(directory, [formulation])[0]


def load_calibrations(directory, formulations=None) -> list[Calibration]:
    """Every calibrated formulation (or the ones named) of an analysis directory, in its order.

    The curves of the estimator the analysis leads with: s*_f(phi) and P*_f(|dphi|),
    standardised to the reference population (``sat_model`` standardised in fits.csv) where
    the analysis computed them; else the per-list s(phi) of the joint model (``sat_model``
    joint) with the paper's P(Pref|dphi); else the paper's two curves.

    Parameters
    ----------
    directory : path-like
    formulations : list of str, optional
        Default: every formulation of ``fits.csv``.

    Returns
    -------
    list of Calibration
    """
    path = _fits_path(directory)
    prov = read_provenance(path.parent)
    fits = pd.read_csv(path, keep_default_na=False)
    joint = std_sat = std_pref = pd.DataFrame(columns=fits.columns)
    if "sat_model" in fits.columns:
        joint = fits[(fits["sat_model"] == "joint") & (fits["curve"] == "sat")].set_index("formulation")
        std = fits[fits["sat_model"] == "standardised"]
        std_sat = std[std["curve"] == "sat"].set_index("formulation")
        std_pref = std[std["curve"] == "pref"].set_index("formulation")
        fits = fits[fits["sat_model"].isin(["published", ""])]
    available = list(dict.fromkeys(fits["formulation"]))
    wanted = available if formulations is None else list(formulations)
    out = []
    for f in wanted:
        rows = fits[fits["formulation"] == f].set_index("curve")
        if not {"sat", "pref"} <= set(rows.index):
            raise SatcalError(f"{path}: no fits for formulation {f!r}; it has "
                              f"{', '.join(available[:8])}{' ...' if len(available) > 8 else ''}")
        beta = lambda c: rows.loc[c, ["beta0", "beta1", "beta2"]].to_numpy(float)
        monotone = {c: _isotonic_if_decreasing(path.parent, f, c, rows.loc[c]) for c in ("sat", "pref")}
        sat, pref, sat_model = beta("sat"), beta("pref"), "published"
        coef = lambda table: table.loc[f, ["beta0", "beta1", "beta2"]].to_numpy(float)
        if f in std_sat.index and f in std_pref.index:
            # the estimator the analysis leads with: both curves standardised to the reference lists
            sat, pref, sat_model = coef(std_sat), coef(std_pref), "standardised"
            monotone["sat"] = _running_max_if_decreasing(sat, std_sat.loc[f])
            monotone["pref"] = _running_max_if_decreasing(pref, std_pref.loc[f])
        elif f in joint.index:
            sat, sat_model = coef(joint), "joint"
            monotone["sat"] = _running_max_if_decreasing(sat, joint.loc[f])
        out.append(Calibration(f, sat, pref,
                               prov.get("normalization", {}).get(f, "max"),
                               prov.get("negatives", {}).get(f, "keep"), prov.get("k"), prov.get("levels"),
                               monotone["sat"], monotone["pref"], sat_model))
    return out


def _running_max_if_decreasing(beta: np.ndarray, fit_row) -> tuple | None:
    """The joint curve's running maximum (its smallest monotone majorant from the left) when
    it decreases somewhere: a probability of satisfaction should not fall as phi grows."""
    if str(fit_row.get("monotone", "True")) != "False":
        return None
    grid = np.round(np.linspace(0.0, 1.0, 1001), 3)
    return grid, np.maximum.accumulate(expit(design(grid) @ beta))


def _isotonic_if_decreasing(directory: Path, formulation: str, curve: str, fit_row) -> tuple | None:
    """The isotonic curve of curves.csv when the fitted quadratic is not monotone."""
    if str(fit_row.get("monotone", "True")) != "False":
        return None
    path = directory / "curves.csv"
    if not path.exists():
        raise SatcalError(f"{directory}: the {curve} curve of {formulation} decreases somewhere, and "
                          "curves.csv (its monotone isotonic fit) is missing")
    curves = pd.read_csv(path)
    if "sat_model" in curves.columns:
        curves = curves[curves["sat_model"].isin(["published", ""]) | curves["sat_model"].isna()]
    c = curves[(curves["formulation"] == formulation) & (curves["curve"] == curve)].sort_values("x")
    if c.empty or c["p_isotonic"].isna().any():
        raise SatcalError(f"{path}: no isotonic fit for the {curve} curve of {formulation}, whose "
                          "quadratic fit decreases somewhere")
    return c["x"].to_numpy(float), np.maximum.accumulate(c["p_isotonic"].to_numpy(float))


def read_provenance(directory) -> dict:
    """``calibration.json`` of an analysis directory ({} for analyses made before it existed).

    Parameters
    ----------
    directory : str or pathlib.Path
        The analysis directory.

    Returns
    -------
    dict

    Raises
    ------
    SatcalError
        calibration.json is not valid JSON.
    """
    import json
    path = Path(directory) / "calibration.json"
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SatcalError(f"{path}: not valid JSON ({exc.msg}), line {exc.lineno}") from None


def calibrated_k(calibrations, k: int | None) -> int:
    """The cutoff to evaluate at: the calibration's own; a different ``k`` is refused (a
    curve fitted on lists of 10 says nothing about lists of 5).

    Parameters
    ----------
    calibrations : iterable
        The calibrations loaded (each with a ``k``, None when not recorded).
    k : int or None
        The cutoff given, or None.

    Returns
    -------
    int

    Raises
    ------
    SatcalError
        The calibrations' cutoffs differ, ``k`` contradicts them, or neither gives one.
    """
    ks = {c.k for c in calibrations if c.k is not None}
    if len(ks) > 1:
        raise SatcalError(f"the calibrations were made at different cutoffs {sorted(ks)}")
    if ks:
        own = ks.pop()
        if k is not None and k != own:
            raise SatcalError(f"--k {k} contradicts the calibration, made on lists of k = {own} "
                              "(calibration.json); its curves hold at that cutoff only")
        return own
    if k is None:
        raise SatcalError("the calibration does not record its k (no calibration.json): give --k")
    return k


@dataclass(repr=False)
class EvaluationResult(ResultTables):
    """Per query, per system and per pair of systems, under every calibrated measure.

    Tables are long (one row per measure) with a ``formulation`` column; :attr:`side_by_side`
    puts each system's expected P(Sat) under every measure in one row.

    Attributes
    ----------
    per_query : pandas.DataFrame
        One row per system, query and measure: ``system``, ``query``, ``formulation``,
        ``sat_model``, ``phi`` and its calibrated ``p_sat``.
    per_system : pandas.DataFrame
        One row per system and measure: ``system``, ``formulation``, ``sat_model``, ``queries``,
        ``mean_phi``, ``expected_sat`` (the mean P(Sat) over queries) and its 95% t interval
        ``sat_lo``, ``sat_hi`` (NaN with one query); best system first within each measure.
    pairs : pandas.DataFrame
        One row per pair of systems and measure: ``system_1``, ``system_2``, ``formulation``,
        ``mean_dphi``, ``queries_1_higher``, ``queries_2_higher``, and the mean P(prefer)
        ``p_prefer_1``, ``p_prefer_2`` and ``p_undecided`` (the rest).
    formulations : list of str
        The measures evaluated under, in the calibrations' order.
    """

    per_query: pd.DataFrame
    per_system: pd.DataFrame
    pairs: pd.DataFrame
    formulations: list

    @property
    def formulation(self) -> str:
        """The first measure evaluated under."""
        return self.formulations[0]

    @property
    def side_by_side(self) -> pd.DataFrame:
        """Systems x measures: mean expected P(Sat), one scale for every measure."""
        wide = self.per_system.pivot(index="system", columns="formulation", values="expected_sat")
        wide = wide[self.formulations]
        return wide.loc[wide.mean(axis=1).sort_values(ascending=False).index].reset_index()

    def tables(self) -> dict[str, pd.DataFrame]:
        """Per query, per system, per pair of systems, and systems x measures
        (``evaluation_<name>.csv`` in :meth:`save`).

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        return {"per_query": self.per_query, "per_system": self.per_system, "pairs": self.pairs,
                "side_by_side": self.side_by_side}

    def figures(self) -> dict:
        """The figures :meth:`save` writes.

        Returns
        -------
        dict of str to matplotlib.figure.Figure
        """
        return {"figure": self.figure()}

    def _file_stem(self, name: str) -> str:
        return "evaluation" if name == "figure" else f"evaluation_{name}"

    def summary(self) -> str:
        """Each system's mean expected P(Sat) under every measure, as text: one system a line,
        or, when there are more measures than systems (every formulation of a calibration, by
        default), one measure a line and one system a column, so that a terminal does not wrap.

        Returns
        -------
        str
        """
        table = self.side_by_side
        fmt = lambda v: f"{v:.4f}"  # noqa: E731
        if table.shape[1] - 1 > len(table):
            shown = table.set_index("system").T.rename_axis("measure").rename_axis(None, axis=1)
            return ("Expected P(Sat) per query, mean over queries (a measure a line, a system a column):\n"
                    + shown.to_string(float_format=fmt))
        return ("Expected P(Sat) per query, mean over queries, under each measure:\n"
                + table.to_string(index=False, float_format=fmt))

    def figure(self):
        """:meth:`plot` on a new figure."""
        return self.plot()

    def plot(self, ax=None):
        """Each system's expected P(Sat) (95% interval over queries) under every measure.

        Parameters
        ----------
        ax : matplotlib Axes, optional
            Where to draw; a new figure when omitted.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from ..fileio import new_figure
        order = self.side_by_side["system"].tolist()[::-1]
        shown = self.formulations[:12]
        new = ax is None
        if new:
            fig, ax = new_figure(figsize=(8, 0.45 * len(order) * max(1, len(shown) / 4) + 1.8))
        else:
            fig = ax.figure
        ypos = {s: i for i, s in enumerate(order)}
        width = 0.8 / max(len(shown), 1)
        for j, f in enumerate(shown):
            rows = self.per_system[self.per_system["formulation"] == f]
            y = rows["system"].map(ypos).to_numpy() - 0.4 + width * (j + 0.5)
            err = np.vstack([rows["expected_sat"] - rows["sat_lo"], rows["sat_hi"] - rows["expected_sat"]])
            ax.errorbar(rows["expected_sat"], y, xerr=err, fmt="osD^v<>ph*XP"[j % 12], ms=4, capsize=2,
                        color=f"C{j % 10}", label=f)
        ax.set_yticks(np.arange(len(order)), order)
        ax.set_xlim(0, 1)
        ax.set_xlabel("expected P(Sat) per query (95% interval over queries)")
        title = "Systems on one scale: expected user satisfaction"
        if len(shown) < len(self.formulations):
            title += f" (first {len(shown)} of {len(self.formulations)} measures shown)"
        ax.set_title(title, fontsize=11)
        ax.legend(title="measure", loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        ax.grid(axis="x", alpha=0.3)
        if new:
            fig.tight_layout()
        return fig


def _score_cube(judgments: Judgments, cube: np.ndarray, queries, forms, k: int, top: int) -> np.ndarray:
    """phi of every (system, query) top k under every formulation: (S, Q, F)."""
    kwargs = {"top_level": top}
    if any(f.uses_pool for f in forms):
        pools = judgments.pools()
        kwargs.update(pools=[pools[q] for q in queries],
                      query_index=np.tile(np.arange(len(queries)), cube.shape[0]))
    phi = score_lists(cube.reshape(-1, k), forms, **kwargs)
    return phi.reshape(cube.shape[0], cube.shape[1], len(forms))


def evaluate_runs(judgments: Judgments, runs: Runs, calibration, k: int | None = None,
                  top_level: int | None = None) -> EvaluationResult:
    """Expected satisfaction of every system and preference between every pair (see module),
    under one calibration or a list of them (one per measure), side by side.

    Parameters
    ----------
    judgments : Judgments
    runs : Runs
    calibration : Calibration or list of Calibration
    k : int, optional
        Default: the calibration's own k.
    top_level : int, optional
        Default: the calibration's scale (levels - 1), else the judgments' top level.

    Returns
    -------
    EvaluationResult
    """
    calibrations = [calibration] if isinstance(calibration, Calibration) else list(calibration)
    if not calibrations:
        raise SatcalError("evaluate needs at least one calibrated formulation")
    forms = [parse_formulation(c.formulation, c.normalization if c.normalization != "pool" else "max",
                               c.negatives) for c in calibrations]
    k = calibrated_k(calibrations, k)
    levels = {c.levels for c in calibrations if c.levels is not None}
    if top_level is None:
        top_level = (levels.pop() - 1) if len(levels) == 1 else judgments.top_level
    if judgments.top_level > top_level:
        raise SatcalError(f"{judgments.source}: level {judgments.top_level} is above the calibration's "
                          f"scale, levels 0..{top_level}: its curves say nothing about it")
    cube, systems, queries = level_cube(runs, judgments, k)
    top = top_level
    phi_all = _score_cube(judgments, cube, queries, forms, k, top)
    n = len(queries)
    from scipy.stats import t as student_t
    t_crit = student_t.ppf(0.975, max(n - 1, 1))
    query_frames, system_frames, rows = [], [], []
    for j, cal in enumerate(calibrations):
        phi = phi_all[:, :, j]
        p_sat = cal.p_sat(phi)
        query_frames.append(pd.DataFrame({"system": np.repeat(systems, n), "query": np.tile(queries, len(systems)),
                                          "formulation": cal.formulation, "sat_model": cal.sat_model,
                                          "phi": phi.ravel(), "p_sat": p_sat.ravel()}))
        mean = p_sat.mean(axis=1)
        sd = p_sat.std(axis=1, ddof=1) if n > 1 else np.zeros(len(systems))
        half = t_crit * sd / np.sqrt(n) if n > 1 else np.full(len(systems), np.nan)
        system_frames.append(pd.DataFrame({"system": systems, "formulation": cal.formulation,
                                           "sat_model": cal.sat_model, "queries": n,
                                           "mean_phi": phi.mean(axis=1), "expected_sat": mean,
                                           "sat_lo": mean - half, "sat_hi": mean + half}))
        for a, b in combinations(range(len(systems)), 2):
            d = phi[a] - phi[b]
            d = np.where(np.abs(d) < TIE_TOLERANCE, 0.0, d)
            pref = cal.p_pref(d)
            p1 = np.where(d > 0, pref, 0.0).mean()
            p2 = np.where(d < 0, pref, 0.0).mean()
            rows.append({"system_1": systems[a], "system_2": systems[b], "formulation": cal.formulation,
                         "mean_dphi": d.mean(), "queries_1_higher": int((d > 0).sum()),
                         "queries_2_higher": int((d < 0).sum()), "p_prefer_1": p1, "p_prefer_2": p2,
                         "p_undecided": 1 - p1 - p2})
    per_system = pd.concat(system_frames, ignore_index=True)
    order = {c.formulation: i for i, c in enumerate(calibrations)}
    per_system = per_system.sort_values(["formulation", "expected_sat"], ascending=[True, False],
                                        key=lambda col: col.map(order) if col.name == "formulation" else col)
    return EvaluationResult(pd.concat(query_frames, ignore_index=True), per_system.reset_index(drop=True),
                            pd.DataFrame(rows), [c.formulation for c in calibrations])
