"""The stages that turn a study's answers into results: analyze and power."""
from __future__ import annotations

from pathlib import Path

from ..fileio import sha256_file
from ..settings import stream_seed


class Analyses:
    """analyze and power of a :class:`~satcal.study.Study` (a part of it)."""

    def analyze(self, force: bool = False, **kwargs):
        """Analyse the ingested answers into analysis/ (an earlier analysis is kept unless
        ``force``).

        Parameters
        ----------
        force : bool, optional
            Replace an earlier analysis (default False).
        **kwargs
            Passed to :func:`satcal.analysis.calibrate`; ``formulations`` defaults to
            :meth:`formulations`.

        Returns
        -------
        satcal.analysis.CalibrationResult
            The calibration result, with the workers, trap report and provenance added.
        """
        with self.locked():
            return self._analyze(force, **kwargs)

    def _analyze(self, force: bool, **kwargs):
        from ..analysis import calibrate
        self.repair_interrupted_ingest()
        previous = self.path / "analysis"
        if previous.exists() and any(previous.iterdir()):
            self.guard(["analysis"], force)
        study = self.study_data()
        kwargs.setdefault("formulations", self.formulations())
        result = calibrate(study, **kwargs)
        from ..quality import typed_workers
        workers = self.table("workers.csv", required=False)
        result.workers = typed_workers(workers) if workers is not None else None
        result.trap_report = self.table("traps_report.csv", required=False)
        result.meta["provenance"].update(
            judgments_sha256=sha256_file(self.path / self["study.judgments"]),
            answers_sha256=sha256_file(self.file("answers.csv")), simulated=self.answers_simulated())
        result.meta["simulated"] = result.meta["provenance"]["simulated"]
        result.meta["simulated_share"] = result.meta["provenance"]["simulated_share"] = self.simulated_share()
        rejects = self.table("rejects.csv", required=False)
        if rejects is not None:
            result.meta["rejected_rows"] = int(len(rejects))
        from ..quality import agreement
        agreed = agreement(study.examples)
        counts = study.examples.groupby("example_id").size()
        result.meta["crowd"] = {"answers": int(len(study.examples)), "examples": int(len(counts)),
                                "answers_per_example_design": self["design.answers_per_example"],
                                "answers_per_example_mean": float(counts.mean()),
                                **({"agreement": agreed.as_dict()} if agreed is not None else {})}
        if self["design.adaptive"]:  # the stopping rule's verdict, in calibration.json and the report
            from ..adaptive_study import calibration_record
            result.meta["provenance"]["adaptive"] = calibration_record(self, result)
        from ..report import write_analysis
        with self.staged("analyze") as outputs:
            write_analysis(result, outputs.dir("analysis"))
            self.record("analyze", {**{k: v for k, v in kwargs.items() if k in ("population", "bootstrap", "seed")},
                                    "formulations": result.bias["formulation"].tolist()}, outputs=outputs)
        return result

    def study_data(self):
        """The ingested, non-trap answers of kept workers with both lists' levels
        (:class:`~satcal.answers.StudyData`)."""
        from ..ingest import study_data
        s = self.settings.study
        return study_data(self.table("answers.csv"), self.table("examples.csv"), s.k, s.levels,
                          self.judgments(), name=s.name, where=self.file("answers.csv"))

    def power(self, budgets, pair, sims: int = 50, boot: int = 100, answers_per_example: int | None = None,
              force: bool = False, progress: bool = False):
        """Power of the design by simulation from ``[simulation]``'s crowd, into power/
        (:func:`satcal.analysis.power.power_analysis`). Returns (result, written paths).

        Parameters
        ----------
        budgets : iterable of int
            Numbers of examples to simulate.
        pair : tuple of str
            The two formulation ids compared.
        sims : int, optional
            Simulations per budget (default 50).
        boot : int, optional
            Bootstrap replicates per simulation (default 100).
        answers_per_example : int or None, optional
            None (default) takes ``design.answers_per_example``.
        force : bool, optional
            Replace an earlier power/ (default False).
        progress : bool, optional
            Show progress (default False).
        """
        from ..analysis.power import power_analysis
        self.guard(["power"], force)  # before the simulations, not after
        result = power_analysis(self.table("examples.csv"), self.k, max(self["study.levels"]),
                                self.user_model(), self.formulations(), tuple(pair), list(budgets),
                                answers_per_example or self["design.answers_per_example"], sims, boot,
                                seed=stream_seed(self.seed, "power"), progress=progress)
        with self.locked(), self.staged("power") as outputs:
            self.guard(["power"], force)
            staged = outputs.dir("power")
            written = {name: self.path / "power" / Path(p).relative_to(staged)
                       for name, p in result.save(staged).items()}
            self.record("power", {"budgets": list(budgets), "sims": sims, "boot": boot, "pair": list(pair)},
                        outputs=outputs)
        return result, written
