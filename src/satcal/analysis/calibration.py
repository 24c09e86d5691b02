"""The whole calibration analysis: :func:`calibrate` runs every stage of
:mod:`satcal.analysis` on a study's answers and returns a :class:`CalibrationResult`.

- the paper's curves, P(Sat|phi) and P(Pref|dphi), with points, model check and b1-b3
  (:mod:`.core`);
- the per-list s(phi) of the joint model and its b1_joint-b3_joint (:mod:`.joint`);
- the bootstrap, resampling what the answers carry (:mod:`.bootstrap`);
- the gain and discount effects (:mod:`.effects`) and the ranking with its uncertainty
  (:mod:`.ranking`);
- the supported ranges, the warnings of thin data and of a design unlike the paper's, and the
  record of how it was all made (``calibration.json``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from .._results import ResultTables
from .._threads import one_blas_thread
from ..answers import ANSWER_CODES, StudyData
from ..errors import SatcalError, check_seed, is_whole
from ..measures import Formulation, resolve_formulations
from .core import (GRID, POPULATIONS, SUPPORT_MIN_COUNT, INDICATOR_RANGES, AnswerTypes, _isotonic_fit,
                   bias_indicators, binned_points, collapse_answers, collapse_study, fit_logit, model_check,
                   preference_curves, satisfaction_curves, supported_mask, supported_range)
from .effects import anova_table
from .ranking import (estimator_columns, lead_estimator, rank_formulations, rank_uncertainty, ranking_verdict,
                      share_text)

__all__ = ["CalibrationResult", "calibrate", "DEFAULTS", "SAT_MODELS", "thin_data_warnings", "design_warnings",
           "simulated_share_text"]


def simulated_share_text(provenance: dict) -> str | None:
    """How many of a calibration's answers came from satcal's simulated crowd, as the repr and
    the report say it: None when none did, "all" when every one did (or the share is unknown),
    else the share as :func:`~satcal.analysis.ranking.share_text` writes it, never "100%"
    while some answers are real.

    Parameters
    ----------
    provenance : dict
        The calibration's provenance (``meta["provenance"]``): ``simulated``, ``simulated_share``.

    Returns
    -------
    str or None

    Examples
    --------
    >>> simulated_share_text({}), simulated_share_text({"simulated": True})
    (None, 'all')
    >>> simulated_share_text({"simulated": True, "simulated_share": 4111 / 4115})
    '99.9%'
    """
    if not provenance.get("simulated"):
        return None
    share = provenance.get("simulated_share")
    return "all" if share is None or share >= 1 else share_text(share)


@dataclass(repr=False)
class CalibrationResult(ResultTables):
    """Tidy tables of a calibration analysis.

    Attributes
    ----------
    fits : pandas.DataFrame
        One row per formulation, curve (``sat``, ``pref``) and satisfaction model: the logit's
        coefficients ``beta0``-``beta2``, their standard errors, n, successes, deviance, AIC,
        convergence and whether the curve is monotone on [0, 1].
    curves : pandas.DataFrame
        Each fitted curve on the grid of phi (0 to 1 by 0.001): ``p``, its 95% band ``lo``,
        ``hi``, the isotonic fit and whether the point is within the data's support.
    points : pandas.DataFrame
        The observed rate of each curve in each bin of phi or |dphi|.
    bias : pandas.DataFrame
        One row per formulation: the indicators b1, b2, b3 (and ``b1_joint``-``b3_joint``,
        ``b1_std``-``b3_std`` when the joint model ran, and ``ties_std``, the share of the
        reference pairs the formulation ties, which its P* leaves out), with its gain, discount
        and family.
    anova : pandas.DataFrame
        Effects of gain and discount on each indicator (DCG family), with the bootstrap Wald
        test's p-value when bootstrapped (:func:`satcal.analysis.effects.anova_table`).
    model_check : pandas.DataFrame
        Cross-validated log loss and Brier score of each curve's models (empty without folds).
    meta : dict
        Counts, options and the data notice (licence and citation) of the analysed study.
    bootstrap : BootstrapResult or None
        The bootstrap's distributions and intervals; None when not bootstrapped.
    workers : pandas.DataFrame or None
        The study's worker table (workers.csv), shown in the report; None for an analysis of
        answers without a study directory.
    """

    fits: pd.DataFrame
    curves: pd.DataFrame
    points: pd.DataFrame
    bias: pd.DataFrame
    anova: pd.DataFrame
    model_check: pd.DataFrame
    meta: dict = field(default_factory=dict)
    bootstrap: object | None = None
    workers: pd.DataFrame | None = None     # a workspace's worker table, shown in the report

    @property
    def estimator(self) -> str:
        """The estimator the ranking leads with: ``standardised`` when the joint model ran on a
        study with judgments (or a given reference population), ``per_list`` when it ran
        without one, else ``paper`` (see :mod:`satcal.analysis.ranking`)."""
        return lead_estimator(self.bias)

    @property
    def ranking(self) -> pd.DataFrame:
        """Formulations by mean rank over the lead estimator's b1-b3, with each one's
        probability of ranking first and its 95% rank interval when bootstrapped."""
        return self.ranking_by(self.estimator)

    def ranking_by(self, estimator: str) -> pd.DataFrame:
        """:attr:`ranking` by another estimator: ``"per_list"``, ``"paper"`` or
        ``"standardised"`` (``b1_std``-``b3_std``, present when the joint model ran on a study
        with judgments).

        Parameters
        ----------
        estimator : str
            ``"per_list"``, ``"paper"`` or ``"standardised"``.

        Returns
        -------
        pandas.DataFrame
        """
        table = rank_formulations(self.bias, estimator)
        unc = self._rank_uncertainty(estimator)
        if unc is not None:
            table = table.merge(unc, on="formulation", how="left")
        return table

    @property
    def rank_uncertainty(self) -> pd.DataFrame | None:
        """:func:`~satcal.analysis.ranking.rank_uncertainty` of the lead estimator (None without
        a bootstrap)."""
        return self._rank_uncertainty(self.estimator)

    def _rank_uncertainty(self, estimator: str) -> pd.DataFrame | None:
        boot = self.bootstrap
        if boot is None:
            return None
        cols = estimator_columns(self.bias, estimator)
        paper = {"b1": 0, "b2": 1, "b3": 2}
        joint = {"b1_joint": 0, "b2_joint": 1, "b3_joint": 2}
        std = {"b1_std": 0, "b2_std": 1, "b3_std": 2}
        parts = []
        for c in cols:
            if c in paper:
                parts.append(boot.indicators[:, :, paper[c]])
            elif c in joint and boot.joint is not None and joint[c] < boot.joint["indicators"].shape[2]:
                parts.append(boot.joint["indicators"][:, :, joint[c]])
            elif c in std and boot.joint is not None and boot.joint.get("std_indicators") is not None:
                parts.append(boot.joint["std_indicators"][:, :, std[c]])
            else:
                return None
        return rank_uncertainty(np.stack(parts, axis=2), list(boot.formulations))

    @property
    def verdict(self):
        """:class:`~satcal.analysis.ranking.RankingVerdict`: whether the answers single out one
        least-biased formulation."""
        return ranking_verdict(rank_formulations(self.bias, self.estimator), self.rank_uncertainty,
                               thin=bool(self.meta.get("warnings")))

    def __repr__(self) -> str:
        best = self.ranking.iloc[0] if len(self.bias) else None
        first = estimator_columns(self.bias, self.estimator)[0]
        lead = f"; ranked first {best.formulation} ({first} = {best[first]:.3f})" if best is not None else ""
        # a notebook shows this line first: answers from satcal's simulated crowd say so there,
        # as the report's banner does
        share = simulated_share_text(self.meta.get("provenance", {}))
        simulated = "" if share is None else " SIMULATED" if share == "all" else f" ({share} SIMULATED)"
        return (f"<CalibrationResult {self.meta.get('name') or 'study'}: {len(self.bias)} formulations, "
                f"{self.meta.get('n_examples', 0)}{simulated} answers, bootstrap "
                f"{self.bootstrap.replicates if self.bootstrap is not None else 0}{lead}>")

    def summary(self, top: int = 10) -> str:
        """The study's parameters, its warnings, the ranking's verdict and the top of the
        ranking (the lead estimator's indicators), as text.

        Parameters
        ----------
        top : int, default 10
            Formulations of the ranking shown.

        Returns
        -------
        str
        """
        prov = self.meta.get("provenance", {})
        lines = [repr(self), ""]
        for key in ("k", "levels", "population", "answers", "examples", "workers", "seed", "bootstrap",
                    "resampling", "indicator_range", "simulated"):
            if prov.get(key) is not None:
                lines.append(f"  {key:<15} {prov[key]}")
        for warning in self.meta.get("warnings", []) + self.meta.get("design_warnings", []):
            lines.append(f"warning: {warning}")
        cols = estimator_columns(self.bias, self.estimator)
        shown = ["formulation"] + cols + ["mean_rank"]
        rank = self.ranking.head(top)
        if "p_best" in rank.columns:
            shown += ["p_best", "rank_lo", "rank_hi"]
        lines += ["", f"Ranked by bias (mean rank over {', '.join(cols)}; top {len(rank)}):",
                  rank[shown].to_string(index=False, float_format=lambda v: f"{v:.4f}"),
                  "", self.verdict.sentence()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        import html
        cols = estimator_columns(self.bias, self.estimator)
        rank = self.ranking.head(10)[["formulation"] + cols + ["mean_rank"]]
        return (f"<p><b>{html.escape(repr(self))}</b></p>"
                + rank.to_html(index=False, float_format=lambda v: f"{v:.4f}", border=0)
                + f"<p>{html.escape(self.verdict.sentence())}</p>")

    def p_sat(self, formulation: str, phi, model: str | None = None) -> np.ndarray:
        """The fitted probability of satisfaction at scores ``phi`` under one formulation.

        Parameters
        ----------
        formulation : str
            A formulation of this result (e.g. ``"lin-const"``).
        phi : float or array
        model : {"standardised", "joint", "published"}, optional
            ``standardised``: s*_f(phi), the per-list curves standardised to the reference
            population; ``joint``: the per-list s(phi) of this formulation's joint model;
            ``published``: the paper's P(Sat|phi). Default: the estimator the ranking leads with.

        Returns
        -------
        ndarray of the same shape as ``phi``: expit(b0 + b1 phi + b2 phi^2) of ``fits.csv`` (for
        the joint model with ``joint_tau`` > 0, its average over the shared effect,
        :func:`~satcal.analysis.joint.shared_curve`).

        Raises
        ------
        SatcalError
            ``model`` is not one of the three, the result has no such curve for
            ``formulation``, or a ``phi`` is outside [0, 1] (the curves are fitted on normalised
            scores; the quadratic beyond them is an extrapolation, not a calibration).
        """
        from scipy.special import expit
        model = model or {"per_list": "joint", "standardised": "standardised"}.get(self.estimator, "published")
        if model not in ("standardised", "joint", "published"):
            # else a misspelt model reads as a missing formulation
            raise SatcalError(f"model must be one of standardised, joint, published (the curves of the "
                              f"estimators standardised, per_list, paper), got {model!r}")
        fits = self.fits
        rows = fits[(fits["formulation"] == formulation) & (fits["curve"] == "sat")]
        if "sat_model" in rows.columns:
            rows = rows[rows["sat_model"] == model]
        if rows.empty:
            known = ", ".join(dict.fromkeys(fits["formulation"]))
            raise SatcalError(f"no {model} satisfaction curve for {formulation!r}; this result has {known}")
        beta = rows[["beta0", "beta1", "beta2"]].to_numpy(float)[0]
        x = np.asarray(phi, float)
        outside = x[(x < 0) | (x > 1)]   # NaN (a missing score) stays NaN
        if outside.size:
            raise SatcalError(f"phi must be normalised scores in [0, 1], got {outside.flat[0]:g}"
                              f"{f' and {outside.size - 1} more outside' if outside.size > 1 else ''}: "
                              "pass scores of the formulation (satcal.score_table gives them)")
        tau = float(rows["joint_tau"].iloc[0]) if "joint_tau" in rows.columns else np.nan
        if model == "joint" and np.isfinite(tau) and tau > 0:
            # the shared-effect model: beta is the curve at v = 0, s(phi) its average over v
            from .joint import shared_curve
            return shared_curve(np.r_[beta, np.zeros(4), tau], x.ravel()).reshape(x.shape)
        return expit(beta[0] + beta[1] * x + beta[2] * x * x)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Fits, curves, binned points, bias indicators, ANOVA, model check and ranking (and the
        bootstrap's pairwise differences and failures when bootstrapped), as tidy tables.

        Returns
        -------
        dict of str to pandas.DataFrame
        """
        out = {"fits": self.fits, "curves": self.curves, "points": self.points, "bias": self.bias,
               "anova": self.anova, "model_check": self.model_check, "ranking": self.ranking}
        if self.bootstrap is not None:
            out.update(self.bootstrap.tables())
        return out



def _formulation_columns(forms: list[Formulation]) -> pd.DataFrame:
    labels = [f.labels for f in forms]
    return pd.DataFrame({"formulation": [f.id for f in forms],
                         "gain": [x["gain"] for x in labels],
                         "discount": [x["discount"] for x in labels],
                         "family": [x["family"] for x in labels]})


STD_COLUMNS = ("b1_std", "b2_std", "b3_std")
#: Defaults of :func:`calibrate`, the same as ``satcal analyze``'s options (one place for both).
DEFAULTS = {"bootstrap": 1000, "seed": 2015, "sat_model": "both"}


def _check_counts(study, bootstrap, n_bins, model_check_folds, n_jobs, seed) -> None:
    """:func:`calibrate`'s study, counts and seed, refused in one line before any fit (a bad
    count otherwise fails deep in NumPy, scikit-learn or joblib, or after every curve is
    fitted; a string seed in ``int()``, a float one truncated in the provenance)."""
    if study is not None and not isinstance(study, StudyData):
        raise SatcalError(f"study must be a StudyData (satcal.load_ecir2015(), satcal.read_external_study(...) "
                          f"or satcal.Study.open(dir).study_data()), got {type(study).__name__}")
    check_seed(seed)
    if not is_whole(bootstrap) or bootstrap < 0 or bootstrap == 1:
        raise SatcalError(f"bootstrap must be 0 (none) or at least 2 replicates, got {bootstrap!r}")
    if not is_whole(n_bins) or n_bins < 1:
        raise SatcalError(f"n_bins must be a whole number of bins, at least 1, got {n_bins!r}")
    if not is_whole(model_check_folds) or model_check_folds < 0 or model_check_folds == 1:
        raise SatcalError(f"model_check_folds must be 0 (no check) or at least 2 folds, got {model_check_folds!r}")
    if not is_whole(n_jobs) or n_jobs == 0:
        raise SatcalError(f"n_jobs must be a number of processes, or -1 for every core (joblib's count), "
                          f"got {n_jobs!r}")


@one_blas_thread
def calibrate(study: StudyData | None = None, formulations=None, *, phi_a: np.ndarray | None = None,
              phi_b: np.ndarray | None = None, answers: Sequence[str] | None = None,
              population: str = "all", n_bins: int = 10, model_check_folds: int = 5,
              bootstrap: int = 1000, seed: int = 2015, n_jobs: int = 1, backend: str = "loky",
              progress: bool = False, sat_model: str = "both",
              indicator_range: str = "data", worker_ids=None, example_ids=None,
              reference=None, standardised_intervals: bool = True,
              shared_effect: bool = True) -> CalibrationResult:
    """Fit P(Sat|phi) and P(Pref|dphi) for every formulation; bias indicators and ANOVA.

    Parameters
    ----------
    study : StudyData, optional
        Examples with both lists' levels and an answer each. Alternatively give ``phi_a``,
        ``phi_b`` (n, F) and ``answers`` (n,) directly (e.g. published scores).
    formulations : list, optional
        Defaults to the 36 study formulations.
    phi_a, phi_b : numpy.ndarray, shape (n, F), optional
        Without a study: each answer's score of list A and of list B under each of the F
        ``formulations`` (one column per formulation, in their order).
    answers : sequence of str, length n, optional
        Without a study: each answer's code, one of ``a_better``, ``b_better``,
        ``both_good``, ``both_bad``.
    population : {"all", "preferences_only"}
        Preference population (see module docstring); ``all`` reproduces the paper.
    n_bins : int, default 10
        Equal-width bins of phi in [0, 1]: the binned points of the figures and the range each
        curve's data support (:func:`supported_range`).
    model_check_folds : int, default 5
        Folds of the cross-validated check of the quadratic logit against a linear logit and an
        isotonic fit (:func:`~satcal.analysis.checks.model_check`); 0 skips the check.
    bootstrap : int, default 1000
        Bootstrap replicates (0 for none; the defaults of ``bootstrap``, ``seed`` and
        ``sat_model`` are ``satcal analyze``'s, :data:`DEFAULTS`). With worker ids they
        resample workers and examples crossed (Owen's pigeonhole bootstrap; workers alone when
        each example has one worker), with example ids only examples, and with neither answers
        (:func:`~satcal.analysis.bootstrap.resampling_clusters`); which one is recorded in
        ``meta["provenance"]["resampling"]``.
    seed : int, default 2015
        Seed of the model check folds, of the bootstrap and of the reference population.
    n_jobs : int, default 1
        Processes for the bootstrap replicates with the ``loky`` backend (joblib's count: -1
        for every core).
    backend : str, default "loky"
        Where the bootstrap runs: ``"loky"`` (local processes), ``"dask"`` (a new local Dask
        cluster) or ``"dask:ADDRESS"`` (an existing scheduler); see
        :func:`~satcal.analysis.bootstrap.parallel_map`.
    progress : bool, default False
        Show progress bars (tqdm) for the curve fits, the joint model and the bootstrap.
    sat_model : {"both", "published", "joint"}, default "both"
        ``published``: the paper's P(Sat|phi), fitted on both_good/both_bad answers (the
        satisfaction of a list given that its partner got the same verdict). ``both`` (or
        ``joint``, the same) adds the per-list curve s(phi) of the joint model over all four
        answers (:mod:`satcal.analysis.joint`): rows with ``sat_model = "joint"`` in curves and
        fits (its band from the observed information) and ``b1_joint``, ``b2_joint`` in bias.
        b1-b3 stay the published model's.
    indicator_range : {"data", "full"}
        Where b1-b3 are computed: over the range of scores each curve's data support
        (:func:`supported_range`, the default), or over the whole of [0, 1] as in the paper (the
        same thing when the design reaches every bin, as ECIR 2015's does). Curves outside their
        support are extrapolations: ``curves.csv`` marks them (``supported``) and the figures
        draw them dotted.
    worker_ids, example_ids : sequence, optional
        With ``phi_a``/``phi_b``/``answers`` and no study: the worker and the example of each
        answer, for the bootstrap's resampling (a study gives its own ``worker_id`` and
        ``example_id`` columns).
    reference : array (N, F), optional
        With the joint model: phi of a reference population of lists under each formulation,
        for the standardised per-list indicators ``b1_std``, ``b2_std``, ``b3_std``
        (:mod:`satcal.analysis.standardise`). Default: drawn from the study's judgments
        (:func:`~satcal.analysis.standardise.reference_lists`, seeded by ``seed``); without
        judgments and without ``reference`` the standardised indicators are not computed.
    standardised_intervals : bool, default True
        Carry ``b1_std``-``b3_std`` through the bootstrap (their intervals, pairwise tests,
        effect tests and rank uncertainty). Every replicate refits the standardised curves over
        the whole reference population (a few seconds per 1,000 replicates of the 36
        formulations, whatever the number of answers); False skips that and leaves the
        standardised indicators without intervals.
    shared_effect : bool, default True
        The joint model with an answer-level effect v ~ N(0, tau^2) shared by both lists of an
        answer (a worker's leniency; :func:`~satcal.analysis.joint.fit_joint_shared`): its
        s(phi) is the population-averaged curve, and tau is in ``fits.csv`` (``joint_tau``).
        False: the independent model (both lists satisfy independently given phi), which is the
        shared model at tau = 0 (the shared fit is that one when no tau > 0 fits better).

    Returns
    -------
    CalibrationResult

    References
    ----------
    Urbano, J. and Marrero, M. (2015). How do gain and discount functions affect the
    correlation between DCG and user satisfaction? ECIR 2015 (P(Sat|phi), P(Pref|dphi) and
    the indicators b1-b3).

    Owen, A. B. (2007). The pigeonhole bootstrap. Annals of Applied Statistics 1(2), 386-411
    (resampling workers and examples crossed).
    """
    _check_counts(study, bootstrap, n_bins, model_check_folds, n_jobs, seed)
    forms = resolve_formulations(formulations)
    if sat_model not in SAT_MODELS:
        raise SatcalError(f"sat_model must be one of {', '.join(SAT_MODELS)}, got {sat_model!r}")
    if population not in POPULATIONS:
        raise SatcalError(f"population must be one of {', '.join(POPULATIONS)}, got {population!r}")
    if indicator_range not in INDICATOR_RANGES:
        raise SatcalError(f"indicator_range must be one of {', '.join(INDICATOR_RANGES)}, "
                          f"got {indicator_range!r}")
    meta: dict = {"population": population, "seed": seed, "n_formulations": len(forms)}
    if study is not None:
        types = collapse_study(study, forms)
        answers = None  # built only for the bootstrap: the collapsed types hold every count
        meta.update(name=study.name, notice=study.notice, k=study.k, n_levels=study.n_levels)
    else:
        if phi_a is None or phi_b is None or answers is None:
            raise SatcalError("calibrate needs a study, or phi_a, phi_b and answers")
        answers = np.asarray(answers, dtype=object)
        phi_a, phi_b = np.atleast_2d(phi_a), np.atleast_2d(phi_b)
        if phi_a.shape != (len(answers), len(forms)) or phi_b.shape != phi_a.shape:
            raise SatcalError(f"phi_a and phi_b need shape ({len(answers)}, {len(forms)})")
        types = collapse_answers(phi_a, phi_b, answers)
    sat_curves = satisfaction_curves(types)
    pref_curves = preference_curves(types, population)
    # each answer code's count, from the types' counts (the same numbers as counting every answer)
    counts = pd.Series(types.counts).groupby(types.answers).sum()
    n_answers = types.n_answers
    n_sat = sat_curves[0].n if sat_curves else 0
    meta.update(n_examples=int(n_answers), n_sat_lists=n_sat, n_sat_examples=n_sat // 2,
                n_distinct_rows=int(types.counts.size),
                answer_counts={c: int(counts.get(c, 0)) for c in ANSWER_CODES})
    if n_sat < 3:
        raise SatcalError("fewer than 2 both_good/both_bad answers: P(Sat|phi) cannot be fitted")

    meta["provenance"] = _provenance(study, forms, population, seed, bootstrap, n_answers)
    meta["provenance"]["sat_model"] = ["published"] + (["joint"] if sat_model != "published" else [])
    meta["provenance"]["pairing_correlation"] = _pairing(types, forms)
    fcols = _formulation_columns(forms)
    support = {"sat": np.array([supported_range(c.x, c.w, n_bins) for c in sat_curves]),
               "pref": np.array([supported_range(c.x, c.w, n_bins) for c in pref_curves])}
    meta["support"] = support
    meta["provenance"]["indicator_range"] = indicator_range
    meta["provenance"]["support"] = _support_record(fcols["formulation"], support, n_bins)
    fit_rows, curve_frames, point_frames, check_rows = [], [], [], []
    p_sat, p_pref = np.empty((len(forms), GRID.size)), np.empty((len(forms), GRID.size))
    iterator = range(len(forms))
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(iterator, desc="fitting curves", unit="formulation")
    for j in iterator:
        ident = fcols.iloc[j].to_dict()
        for curve, data, store in (("sat", sat_curves[j], p_sat), ("pref", pref_curves[j], p_pref)):
            x, y, w = data.x, data.y, data.w
            # an answer's A and B rows form one cluster (its row of AnswerTypes, data.types)
            fit = fit_logit(x, y, weights=w, clusters=data.types if curve == "sat" else None)
            store[j] = fit.predict(GRID)
            lo, hi = fit.band(GRID)
            fit_rows.append({**ident, "curve": curve, "n": fit.n, "successes": fit.successes,
                             "beta0": fit.beta[0], "beta1": fit.beta[1], "beta2": fit.beta[2],
                             "se0": np.sqrt(fit.cov[0, 0]), "se1": np.sqrt(fit.cov[1, 1]),
                             "se2": np.sqrt(fit.cov[2, 2]), "deviance": fit.deviance,
                             "aic": fit.aic, "converged": fit.converged,
                             # a quadratic logit can turn down inside [0, 1]; evaluate then uses
                             # the isotonic fit, which cannot
                             "monotone": bool(np.all(np.diff(store[j]) >= -1e-12))})
            iso = _isotonic_curve(x, y, w)
            rng = support[curve][j]
            curve_frames.append(pd.DataFrame({**{c: [v] * GRID.size for c, v in ident.items()},
                                              "curve": curve, "x": GRID, "p": store[j], "lo": lo,
                                              "hi": hi, "p_isotonic": iso,
                                              "supported": supported_mask(rng)}))
            pts = binned_points(x, y, n_bins, weights=w)
            point_frames.append(pts.assign(**ident, curve=curve))
            checks = model_check(x, y, model_check_folds, seed, weights=w) if model_check_folds else []
            for row in checks:
                check_rows.append({**ident, "curve": curve, **row})
    ranges = support if indicator_range == "data" else {"sat": None, "pref": None}
    ind = bias_indicators(p_sat, p_pref, sat_range=ranges["sat"], pref_range=ranges["pref"])
    bias = fcols.assign(**ind)[["formulation", "gain", "discount", "b1", "b2", "b3", "family"]]
    joint_models = None
    if sat_model != "published":
        support["sat_joint"] = np.array([_list_support(types, j, n_bins) for j in range(len(forms))])
        meta["provenance"]["support"] = _support_record(fcols["formulation"], support, n_bins)
        ranges["sat_joint"] = support["sat_joint"] if indicator_range == "data" else None
        joint_fits, joint_curves, b_joint, joint_models = _joint_model(types, fcols, progress,
                                                                      ranges["sat_joint"], ranges["pref"],
                                                                      shared_effect, support["sat_joint"])
        meta["provenance"]["joint_model"] = (
            f"shared answer effect v ~ N(0, tau^2) on both lists' logits, {joint_models[0].nodes}-node "
            "Gauss-Hermite" if shared_effect else "independent lists given phi (tau = 0)")
        fit_rows += joint_fits
        curve_frames += joint_curves
        bias = bias.assign(**b_joint)
        ref_phi, ref_rule = _reference(study, forms, reference, seed)
        if ref_phi is not None:
            from .standardise import akaike_weights, reference_ties, standardised_indicators
            weights = akaike_weights([m.loglik for m in joint_models])
            thetas = np.stack([m.theta for m in joint_models])
            b_std = standardised_indicators(thetas, ref_phi, weights, ranges["sat_joint"], ranges["pref"],
                                            coefficients=True)
            ties = reference_ties(ref_phi)   # P*_f is fitted to the pairs f orders, (1 - ties) of them
            # `supported` marks where the study's answers hold data, whatever range the
            # indicators average over
            std_fits, std_curves = _standardised_rows(fcols, b_std.pop("beta_sat"), b_std.pop("beta_pref"),
                                                      len(ref_phi), support, ties)
            fit_rows += std_fits
            curve_frames += std_curves
            bias = bias.assign(**{c: v for c, v in b_std.items()}, ties_std=ties)
            meta["standardisation"] = {"reference_phi": ref_phi, "weights": weights, "thetas": thetas}
            meta["provenance"]["reference_population"] = {
                "rule": ref_rule, "lists": int(len(ref_phi)),
                "satisfaction_model": "per-list curves of the joint models mixed with Akaike weights",
                "weights": {f.id: round(float(w), 6) for f, w in zip(forms, weights) if w >= 1e-6},
                "ties": {"rule": "share of the reference pairs (lists 2i, 2i + 1) a formulation does not "
                                 "order (|dphi| < TIE_TOLERANCE); its P* is fitted to the others. A "
                                 "constant given the reference population (no interval)",
                         "shares": {f.id: round(float(t), 6) for f, t in zip(forms, ties)}}}
    for frame in curve_frames:
        frame.insert(frame.columns.get_loc("curve") + 1, "sat_model", frame.pop("sat_model")
                     if "sat_model" in frame.columns else "published")
    fit_rows = [{**row, "sat_model": row.get("sat_model", "published")} for row in fit_rows]
    order = ["formulation", "gain", "discount", "curve"]
    points = pd.concat(point_frames, ignore_index=True)
    points = points[order + [c for c in points.columns if c not in order]]
    result = CalibrationResult(
        fits=pd.DataFrame(fit_rows), curves=pd.concat(curve_frames, ignore_index=True),
        points=points, bias=bias, anova=anova_table(bias),
        model_check=pd.DataFrame(check_rows, columns=order + ["model", "log_loss", "brier", "folds"]),
        meta=meta)
    if bootstrap:
        from .bootstrap import bootstrap_calibration, resampling_clusters
        if study is not None:
            worker_ids, example_ids = (study.examples[c] if c in study.examples.columns else None
                                       for c in ("worker_id", "example_id"))
            answers = np.asarray(study.answers, dtype=object)
        resampling, clusters = resampling_clusters(len(answers), worker_ids, example_ids)
        meta["provenance"]["resampling"] = resampling
        result.bootstrap = bootstrap_calibration(None, None, answers, forms, population=population,
                                                 replicates=bootstrap, seed=seed, n_jobs=n_jobs,
                                                 backend=backend, progress=progress, types=types,
                                                 joint_fits=joint_models, clusters=clusters,
                                                 resampling=resampling, support=ranges)
        std = meta.get("standardisation")
        if std is not None and standardised_intervals and result.bootstrap.joint is not None:
            from .standardise import standardised_indicators
            # each replicate mixes the joint models by its own fit (Buckland, Burnham and
            # Augustin 1997), so which formulation's curve is the satisfaction model is
            # uncertain in the intervals as it is in the data
            from .standardise import akaike_weights
            rep_weights = akaike_weights(result.bootstrap.joint["loglik"])
            reps = standardised_indicators(result.bootstrap.joint["thetas"], std["reference_phi"],
                                           rep_weights, ranges["sat_joint"], ranges["pref"],
                                           centre=std["thetas"], coefficients=True, n_jobs=n_jobs,
                                           backend=backend)
            result.bootstrap.joint["std_bands"] = _standardised_bands(
                fcols["formulation"], reps.pop("beta_sat"), reps.pop("beta_pref"))
            result.bootstrap.joint["std_indicators"] = np.stack([reps[c] for c in STD_COLUMNS], axis=2)
            result.bootstrap.joint["std_estimates"] = result.bias[list(STD_COLUMNS)].to_numpy(float)
        result.bootstrap.attach(result)
        result.anova = anova_table(result.bias, bootstrap=result.bootstrap)  # the valid test
    result.meta["warnings"] = thin_data_warnings(result)
    result.meta["provenance"]["warnings"] = result.meta["warnings"]
    result.meta["design_warnings"] = design_warnings(result)
    result.meta["provenance"]["design_warnings"] = result.meta["design_warnings"]
    return result


#: How far a design's pairing correlation may stray from the ECIR 2015 pairs' before the paper's
#: estimator is called incomparable with the published one (the audit's two designs, -0.06
#: and -0.77, moved lin-const's b2 from 0.096 to 0.325).
PAIRING_TOLERANCE = 0.2


def design_warnings(result: "CalibrationResult") -> list[str]:
    """Sentences saying when the paper's estimator is read on a design unlike the paper's.

    Its P(Sat|phi) is the satisfaction of a list given that its partner got the same verdict,
    so it moves with how the design pairs lists (corr(phi_A, phi_B) of the examples).

    Parameters
    ----------
    result : CalibrationResult

    Returns
    -------
    list of str
        Empty when the design pairs lists as the paper's did.
    """
    from ..generate import ECIR2015_PAIRING_CORRELATION as PAPER
    r = result.meta.get("provenance", {}).get("pairing_correlation", {}).get("median")
    if r is None or abs(r - PAPER) <= PAIRING_TOLERANCE:
        return []
    lead = ("the ranking leads with the standardised per-list estimator, which does not depend on it"
            if "b1_std" in result.bias.columns else
            "the ranking leads with the per-list estimator, which does not depend on it"
            if "b1_joint" in result.bias.columns else
            "run the analysis with the joint model (--sat-model both) for the per-list estimator, "
            "which does not depend on it")
    return [f"This design pairs lists with correlation {r:+.2f} between phi_A and phi_B (median over "
            f"formulations; the ECIR 2015 pairs: {PAPER:+.2f}). The paper's P(Sat|phi) and b1-b3 depend "
            f"on that pairing, so here they are not comparable with the published ones; {lead}."]


#: Below these, a study's answers are called thin and its ranking is not crowned: the paper
#: collected 4,115 answers; a cluster bootstrap over fewer than 20 workers rests on too few
#: clusters; a bin of fewer than 20 observations gives a proportion within +/- 0.2 at best.
THIN = {"answers": 1000, "workers": 20, "per_bin": 20}


def thin_data_warnings(result: "CalibrationResult") -> list[str]:
    """Sentences saying where the answers are too thin, or the scores too narrow, to support
    the analysis's claims (shown first in the report, printed by the CLI, kept in
    calibration.json).

    Parameters
    ----------
    result : CalibrationResult

    Returns
    -------
    list of str
        Empty when nothing is thin.
    """
    out = []
    prov = result.meta.get("provenance", {})
    n = int(result.meta.get("n_examples", 0))
    if n < THIN["answers"]:
        out.append(f"Only {n} answers (the paper collected 4,115): curves and indicators are uncertain; "
                   "read the intervals, not the point estimates.")
    workers = prov.get("workers")
    if workers is not None and workers < THIN["workers"]:
        out.append(f"Only {workers} workers: what one worker thinks weighs on every estimate, and an "
                   "interval that resamples workers rests on few of them.")
    pts = result.points[result.points["n"] > 0]
    sparse = pts[pts["n"] < THIN["per_bin"]]
    if len(pts) and len(sparse) / len(pts) > 0.25:
        out.append(f"{len(sparse)} of {len(pts)} bins with data hold fewer than {THIN['per_bin']} "
                   "observations: their proportions are within +/- 0.2 at best.")
    support = result.meta.get("support")
    if support is not None:
        sat = support.get("sat_joint", support["sat"])  # the lead estimator's curve
        short = np.flatnonzero(~((sat[:, 0] <= 1e-9) & (sat[:, 1] >= 1 - 1e-9)))
        if short.size:
            names = result.bias["formulation"].to_numpy()[short]
            shown = ", ".join(f"{f} [{sat[j, 0]:.1f}, {sat[j, 1]:.1f}]" for f, j in zip(names[:6], short[:6]))
            more = f" and {short.size - 6} more" if short.size > 6 else ""
            where = ("over that range only, so they are not comparable with indicators over [0, 1]"
                     if prov.get("indicator_range", "data") == "data" else
                     "over [0, 1] all the same (indicator_range = full): partly extrapolated")
            out.append(f"The answers do not reach all of [0, 1] for {short.size} formulations "
                       f"({shown}{more}): their curves beyond it are extrapolations (dotted in the "
                       f"figures) and their indicators are computed {where}.")
    return out


#: Satisfaction models of ``calibrate(sat_model=...)``; ``joint`` is the same as ``both``.
SAT_MODELS = ("published", "both", "joint")


def _list_support(types: AnswerTypes, j: int, n_bins: int) -> tuple:
    """Where the per-list curve of formulation ``j`` has data: every answered list counts (the
    joint model uses all four answers), A and B alike."""
    x = np.concatenate([types.phi_a[:, j], types.phi_b[:, j]])
    return supported_range(x, np.concatenate([types.counts, types.counts]), n_bins)


def _joint_model(types: AnswerTypes, fcols: pd.DataFrame, progress: bool, sat_range=None, pref_range=None,
                 shared_effect: bool = True, support=None):
    """The joint model of every formulation: fits rows (with the maximised log-likelihood, how
    many starts agreed, tau and the fit's flags), curve frames, and b1_joint, b2_joint, b3_joint
    (b3 from the implied preference curve, :func:`~satcal.analysis.joint.implied_preference`).
    ``shared_effect``: the shared-effect model (:func:`~satcal.analysis.joint.fit_joint_shared`,
    the default), else the independent one (:func:`~satcal.analysis.joint.fit_joint`).
    ``sat_range``, ``pref_range``: where the indicators average (None: [0, 1]); ``support``
    (F, 2): where the answered lists hold data, the curves' ``supported`` column (None: the
    indicators' range)."""
    from .joint import fit_joint, fit_joint_shared, implied_preference
    fits, curves, b1, b2, b3, models = [], [], [], [], [], []
    iterator = range(len(fcols))
    if progress:
        from tqdm.auto import tqdm
        iterator = tqdm(iterator, desc="fitting joint models", unit="formulation")
    for j in iterator:
        ident = fcols.iloc[j].to_dict()
        fit = fit_joint(types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts)
        if shared_effect:
            fit = fit_joint_shared(types.phi_a[:, j], types.phi_b[:, j], types.answers, types.counts,
                                   independent=fit)
        models.append(fit)
        p, lo, hi = fit.predict(GRID)
        se = np.sqrt(np.diag(fit.cov)[:3])
        tau_se = float(np.sqrt(fit.cov[7, 7])) if fit.theta.size > 7 and fit.cov[7, 7] >= 0 else np.nan
        fits.append({**ident, "curve": "sat", "sat_model": "joint", "n": fit.n, "successes": np.nan,
                     "beta0": fit.beta[0], "beta1": fit.beta[1], "beta2": fit.beta[2],
                     "se0": se[0], "se1": se[1], "se2": se[2], "deviance": -2 * fit.loglik,
                     "aic": -2 * fit.loglik + 2 * fit.theta.size, "converged": fit.converged,
                     "monotone": bool(np.all(np.diff(p) >= -1e-12)),
                     **{f"joint_{k}": v for k, v in fit.params().items() if not k.startswith("b")},
                     **({"joint_tau_se": tau_se} if fit.theta.size > 7 else {}),
                     "loglik": fit.loglik, "starts_agreeing": fit.starts_agreeing, "starts": fit.starts,
                     "flags": "; ".join(fit.flags)})
        s_rng = None if sat_range is None else sat_range[j]
        p_rng = None if pref_range is None else pref_range[j]
        curves.append(pd.DataFrame({**{c: [v] * GRID.size for c, v in ident.items()}, "curve": "sat",
                                    "sat_model": "joint", "x": GRID, "p": p, "lo": lo, "hi": hi,
                                    "p_isotonic": np.nan,
                                    "supported": supported_mask(s_rng if support is None else support[j])}))
        ind = bias_indicators(p, implied_preference(fit, GRID), sat_range=s_rng, pref_range=p_rng)
        b1.append(float(ind["b1"]))
        b2.append(float(ind["b2"]))
        b3.append(float(ind["b3"]))
    return fits, curves, {"b1_joint": b1, "b2_joint": b2, "b3_joint": b3}, models


def _standardised_rows(fcols: pd.DataFrame, beta_sat, beta_pref, n_lists: int, ranges: dict,
                       ties=None):
    """fits.csv and curves.csv rows of the standardised curves s*_f and P*_f
    (``sat_model = standardised``): their coefficients, fitted to the reference population (n is
    its lists, or for P*_f the pairs f orders: the pairs less the share ``ties`` (F,) it ties),
    and the curves on the grid (a band only from the bootstrap). ``ranges``: the study's data
    support (``sat_joint``: every answered list's phi, ``pref``: the answers' |dphi|; (F, 2) or
    None), which ``supported`` marks: the reference population reaches further than the answers.
    """
    from scipy.special import expit as _expit
    from .core import design
    fits, curves = [], []
    for j in range(len(fcols)):
        ident = fcols.iloc[j].to_dict()
        pairs = n_lists // 2
        ordered = pairs if ties is None else int(round(pairs * (1 - ties[j])))
        for curve, beta, rng, n in (("sat", beta_sat[j], ranges.get("sat_joint"), n_lists),
                                    ("pref", beta_pref[j], ranges.get("pref"), ordered)):
            p = _expit(design(GRID) @ beta)
            fits.append({**ident, "curve": curve, "sat_model": "standardised", "n": n,
                         "beta0": beta[0], "beta1": beta[1], "beta2": beta[2],
                         "converged": bool(np.isfinite(beta).all()),
                         "monotone": bool(np.all(np.diff(p) >= -1e-12))})
            curves.append(pd.DataFrame({**{c: [v] * GRID.size for c, v in ident.items()},
                                        "curve": curve, "sat_model": "standardised", "x": GRID, "p": p,
                                        "lo": np.nan, "hi": np.nan, "p_isotonic": np.nan,
                                        "supported": supported_mask(None if rng is None else rng[j])}))
    return fits, curves


def _standardised_bands(formulations, beta_sat, beta_pref) -> dict:
    """Percentile bands of s*_f and P*_f over the bootstrap replicates' coefficients (B, F, 3)."""
    from scipy.special import expit as _expit
    from .bootstrap import _quantiles
    from .core import design
    X = design(GRID).T
    return {(f, curve): _quantiles(_expit(beta[:, j, :] @ X))
            for curve, beta in (("sat", beta_sat), ("pref", beta_pref))
            for j, f in enumerate(formulations)}


def _reference(study, forms, reference, seed: int):
    """phi of the reference population (N, F) and its definition; (None, None) when there is
    neither a given population nor judgments to draw one from."""
    from .standardise import REFERENCE_RULE, reference_scores
    if reference is not None:
        ref = np.atleast_2d(np.asarray(reference, float))
        if ref.ndim != 2 or ref.shape[1] != len(forms):
            raise SatcalError(f"reference needs shape (lists, {len(forms)}), got {ref.shape}")
        return ref, "given by the caller"
    if study is None or study.judgments is None:
        return None, None
    return reference_scores(study.judgments, forms, study.k, study.n_levels, seed=seed), REFERENCE_RULE


def _support_record(formulations, support: dict, n_bins: int) -> dict:
    """calibration.json's record of where each curve has data."""
    return {"rule": f"hull of the {n_bins} bins holding at least {SUPPORT_MIN_COUNT} observations",
            "min_count": SUPPORT_MIN_COUNT,
            "ranges": {f: {curve: [None if not np.isfinite(v) else float(v) for v in support[curve][j]]
                           for curve in support} for j, f in enumerate(formulations)}}


def _provenance(study, forms, population: str, seed: int, bootstrap: int, n_answers: int) -> dict:
    """How the calibration was made (``calibration.json``); callers that know the input
    files add their hashes and whether the answers are simulated."""
    from ..fileio import package_versions
    ex = study.examples if study is not None else None
    count = lambda col: int(ex[col].nunique()) if ex is not None and col in ex.columns else None
    return {
        "k": study.k if study is not None else None,
        "levels": study.n_levels if study is not None else None,
        "normalization": {f.id: f.normalization for f in forms},
        "negatives": {f.id: f.negatives for f in forms},
        "formulations": [f.id for f in forms],
        "population": population,
        "sat_model": ["published"],
        "answers": int(n_answers),
        "examples": count("example_id"),
        "workers": count("worker_id"),
        "seed": int(seed),
        "bootstrap": int(bootstrap),
        "packages": package_versions(),
        "simulated": False,
    }


def _pairing(types: AnswerTypes, forms) -> dict:
    """corr(phi_A, phi_B) of the answered examples (each answer once): the median over the
    formulations and each one's (the paper's curve depends on it)."""
    from ..generate import pairing_correlation
    r = pairing_correlation(types.phi_a, types.phi_b, types.counts)
    return {"median": round(float(np.nanmedian(r)), 4) if np.isfinite(r).any() else None,
            "by_formulation": {f.id: (round(float(v), 4) if np.isfinite(v) else None) for f, v in zip(forms, r)}}


def _isotonic_curve(x, y, w=None) -> np.ndarray:
    w = np.ones(np.size(x)) if w is None else np.asarray(w, float)
    if len(np.unique(np.asarray(x)[w > 0])) < 2:
        return np.full(GRID.size, np.nan)
    return _isotonic_fit(np.asarray(x, float), np.asarray(y, float), w).predict(GRID)
