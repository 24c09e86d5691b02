"""Reading a study: its settings, inputs and tables, the design its tables were made under, the
overwrite guard and the refusals once answers are collected."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputFileError, SatcalError
from ..fileio import sha256_file
from ..judgments import Judgments, read_judgments
from ..settings import Settings
from .layout import DESIGN_FILE, DESIGN_TABLES
from .served import _ingest_served, _refuse_while_served, served_answers


class Tables:
    """Settings, inputs and tables of a :class:`~satcal.study.Study` (a part of it)."""

    @property
    def settings(self) -> Settings:
        """study.toml as frozen values, one dataclass per section (:mod:`satcal.settings`)."""
        return Settings.from_config(self.config)

    def __getitem__(self, dotted: str):
        section, name = dotted.split(".")
        return self.config[section][name]

    def platform_settings(self, platform: str) -> str:
        """One line of the settings ``[platforms.<platform>]`` gives the exported files ("" for a
        platform without settings of its own).

        Parameters
        ----------
        platform : str
            Platform name; empty takes ``presentation.platform``.

        Returns
        -------
        str
        """
        from ..platforms import get_platform
        plat = get_platform(platform or self["presentation.platform"])
        if plat.describe is None:
            return ""
        per_page = self["presentation.items_per_page"]
        key = self.table("key.csv", required=False)
        if key is not None and len(key):  # the exported batch's pages ("auto" resolved)
            per_page = int(key.groupby("page").size().max())
        return plat.describe(self.config["platforms"][plat.name], per_page, self["design.answers_per_example"],
                             traps=self.trap_count(key) if key is not None else None)

    @property
    def k(self) -> int:
        return self["study.k"]

    @property
    def seed(self) -> int:
        return self["study.seed"]

    def file(self, name: str) -> Path:
        """The path of ``name`` inside the study directory.

        Parameters
        ----------
        name : str
            A path relative to the study directory.

        Returns
        -------
        pathlib.Path
        """
        return self.path / name

    def judgments(self) -> Judgments:
        return read_judgments(self.path / self["study.judgments"])

    def documents(self) -> pd.DataFrame | None:
        rel = self["study.documents"]
        return _read_documents(self.path / rel) if rel else None

    def topics(self) -> pd.DataFrame | None:
        rel = self.config["study"].get("topics", "")
        if not rel:
            return None
        from ..topics import read_topics
        return read_topics(self.path / rel)

    def formulations(self, normalization: str = "max", negatives: str = "keep", extra: bool = True):
        """The study's gains crossed with its discounts, custom ones included, then (unless
        ``extra`` is false) the extra measures of ``formulations.extra``.

        Parameters
        ----------
        normalization : str, optional
            Normalisation of every formulation (default ``"max"``).
        negatives : str, optional
            How negative labels are treated (default ``"keep"``).
        extra : bool, optional
            Whether to add ``formulations.extra`` (default True).

        Returns
        -------
        list
            The formulations (:mod:`satcal.measures`).
        """
        from ..measures import Discount, Gain, formulation, study_formulations
        section = self.config["formulations"]
        levels = self["study.levels"]
        gains = list(self["formulations.gains"])
        for name, values in section.get("custom_gains", {}).items():
            gains.append(Gain.from_mapping(dict(zip(levels, map(float, values))), name))
        discounts = list(self["formulations.discounts"])
        for name, values in section.get("custom_discounts", {}).items():
            discounts.append(Discount.from_factors([float(v) for v in values], name))
        forms = study_formulations(normalization, negatives, gains=gains, discounts=discounts)
        if not extra:
            return forms
        known = {f.id for f in forms}
        return forms + [formulation(m, normalization, negatives) for m in section.get("extra", [])
                        if m not in known]

    def table(self, name: str, required: bool = True) -> pd.DataFrame | None:
        """The workspace table ``name``, read as strings (spreadsheet escapes undone).

        A design table is checked against study.toml's k and levels (:meth:`check_design`).

        Parameters
        ----------
        name : str
            File name of the table in the study directory, e.g. ``"answers.csv"``.
        required : bool, optional
            Whether a missing table is an error (default True); otherwise None is returned.

        Returns
        -------
        pandas.DataFrame or None

        Raises
        ------
        SatcalError
            The table is missing and required (naming the command that writes it), or it was
            made under another design.
        """
        path = self.path / name
        if not path.exists():
            if required:
                step = {"examples.csv": "satcal generate", "key.csv": "satcal export",
                        "items.csv": "satcal export", "answers.csv": "satcal ingest",
                        "traps.csv": "satcal generate", "scores.csv": "satcal generate",
                        "workers.csv": "satcal ingest", "traps_report.csv": "satcal ingest"}.get(name)
                hint = f"run {step} {self.path} first" if step else "was it deleted?"
                raise SatcalError(f"{path}: missing; {hint}")
            return None
        from ..fileio import spreadsheet_value
        table = spreadsheet_value(pd.read_csv(path, dtype=str, keep_default_na=False))
        if name in DESIGN_TABLES:
            self.check_design(name, table)
        return table

    def check_design(self, name: str, table: pd.DataFrame) -> None:
        """Refuse a table made under another k or other levels than study.toml now says: its
        lists would be read with the wrong length, or its scores rescaled without a word.

        Parameters
        ----------
        name : str
            The table's file name (``examples.csv``, ``items.csv``, ...).
        table : pandas.DataFrame
            Its content.

        Raises
        ------
        SatcalError
            The table was made with another k or other levels.
        """
        design = self.generated_design()
        was_k = design.get("k")
        cols = {"examples.csv": r"a\d+", "items.csv": r"A\d+"}.get(name)
        if cols is not None:
            own_k = sum(bool(re.fullmatch(cols, c)) for c in table.columns)
            if name == "items.csv" and was_k is not None and own_k and own_k != was_k:
                raise SatcalError(f"{self.path}/items.csv was exported with k = {own_k}, but examples.csv was "
                                  f"generated with k = {was_k}: run satcal export {self.path} --force")
            was_k = was_k if was_k is not None else own_k or None
        if was_k is not None and was_k != self.k:
            raise SatcalError(f"{self.path}/study.toml: study.k = {self.k}, but {name} was made with k = {was_k}; "
                              + self._design_fix(f"study.k back to {was_k}"))
        levels = design.get("levels")
        if levels is not None and list(levels) != list(self["study.levels"]):
            raise SatcalError(f"{self.path}/study.toml: study.levels = {self['study.levels']}, but {name} was made "
                              f"with levels = {levels} (phi would be rescaled); "
                              + self._design_fix(f"study.levels back to {levels}"))

    def generated_design(self) -> dict:
        """k and levels the examples were generated with (empty before generate, or for a
        workspace generated before they were recorded)."""
        path = self.path / DESIGN_FILE
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise SatcalError(f"{path}: not readable JSON; run satcal generate {self.path} --force "
                              "to write it again") from None

    def _design_fix(self, back: str) -> str:
        if self.collected() or served_answers(self.path) is not None:
            return (f"put {back} (the answers were collected with it; another design needs a new "
                    "study directory: satcal init NEW_DIR ...)")
        return (f"put {back}, or run satcal generate {self.path} --force and satcal export {self.path} "
                "--force to make the examples and batch again")

    def guard(self, names, force: bool) -> None:
        """Refuse to overwrite outputs unless asked.

        Parameters
        ----------
        names : iterable of str
            Output paths relative to the study directory.
        force : bool
            Whether overwriting is allowed.

        Raises
        ------
        SatcalError
            One of them exists and ``force`` is false.
        """
        existing = [n for n in names if (self.path / n).exists()]
        if existing and not force:
            what = (f"{existing[0]} already exists" if len(existing) == 1 else
                    f"{', '.join(existing)} already exist")
            raise SatcalError(f"{self.path}: {what}; pass --force to overwrite")

    def answers_simulated(self) -> bool:
        """Whether any answer is simulated (see :meth:`simulated_share`)."""
        return self.simulated_share() > 0

    def simulated_share(self) -> float:
        """The share of answers.csv that is simulated: from a file the simulated crowd wrote
        (same content as one in simulated/), or from a worker that workers.csv marks
        ``simulated`` (the hosted study's dry run, ``satcal simulate --serve``)."""
        answers = self.table("answers.csv", required=False)
        if answers is None or not len(answers):
            return 0.0
        index, sim_dir = self.path / "raw" / "index.csv", self.path / "simulated"
        sim = {sha256_file(f) for f in sim_dir.glob("*-results.*")} if sim_dir.exists() else set()
        files = pd.read_csv(index, dtype=str) if index.exists() and sim else pd.DataFrame(columns=["sha256", "file"])
        workers = self.table("workers.csv", required=False)
        marked = (set(workers.loc[workers["simulated"].astype(str) == "True", "worker_id"])
                  if workers is not None and "simulated" in workers.columns else set())
        simulated = (answers["source_file"].isin(set(files.loc[files["sha256"].isin(sim), "file"]))
                     | answers["worker_id"].isin(marked))
        return float(simulated.mean())

    def collected(self) -> bool:
        """Whether any result file has been ingested."""
        index = self.path / "raw" / "index.csv"
        return index.exists() and len(pd.read_csv(index, dtype=str)) > 0

    def refuse_if_collected(self, command: str) -> None:
        """Once answers are collected, the examples and the key they refer to are fixed: a new
        design or presentation would change what the collected answers mean. Answers still in
        a hosted study's database count as collected.

        Parameters
        ----------
        command : str
            The command's name, for the message.

        Raises
        ------
        SatcalError
            Answers are ingested, held by a hosted study's database, or a server is running.
        """
        if self.collected():
            raise SatcalError(f"{self.path} holds collected answers (raw/); {command} would change the "
                              "examples or the key they answer, even with --force. For a new batch, "
                              "start a new study directory (satcal init NEW_DIR ...)")
        _refuse_while_served(self.path, command)
        held = served_answers(self.path)
        if held is not None:
            url, n = held
            raise SatcalError(f"{url} holds {n} answers to this study's key.csv, not ingested yet; {command} "
                              "would change the examples they answer, even with --force. Ingest them "
                              f"first ({_ingest_served(self.path, url)}); a new design then needs a new "
                              "study directory (satcal init NEW_DIR ...)")


def _read_documents(path: Path) -> pd.DataFrame:
    from ..fileio import read_csv_strings
    table = read_csv_strings(path, "a documents CSV with doc and any of title, snippet, url, audio_url")
    if "doc" not in table.columns:
        raise InputFileError(path, "missing column doc (the documents table needs doc and any of "
                                   "title, snippet, url, audio_url)", 1)
    dup = table["doc"].duplicated()
    if dup.any():
        raise InputFileError(path, f"document {table['doc'][dup].iloc[0]!r} is listed twice",
                             int(np.flatnonzero(dup)[0]) + 2, "doc")
    return table
