"""The study: one directory per study, and the one class that runs every stage on it.

:class:`Study` owns the directory: its paths, tables, lock, output sets, manifest and the raw
archive of result files. Every stage (generate, export, preview, simulate, ingest, remove,
analyze, power, the hosted study) is a function of values in its own module; a ``Study``
method reads the values from the directory and study.toml (:mod:`satcal.settings`), calls the
stage and writes what it returns as one output set. ``study.toml`` holds the design; every
command reads and validates it. Outputs are written atomically, nothing is overwritten without
``force``, and ``manifest.json`` records the package versions, the seeds, the hashes of the
inputs and the command history.
"""
from __future__ import annotations

import json
import os
import platform as _platform
import re
import shutil
import sys
import tomllib
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from ._version import __version__
from .errors import InputFileError, SatcalError
from .fileio import OutputSet, atomic_write_text, sha256_file, spreadsheet_safe, spreadsheet_value
from .judgments import Judgments, read_judgments
from . import settings as settings_model
from .settings import Settings, stream_seed

#: Seconds a command waits for another one holding the workspace lock.
LOCK_WAIT = 600

__all__ = ["Study", "Workspace", "STUDY_TEMPLATE"]

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
    from .platforms import PLATFORMS
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


def __getattr__(name):
    if name == "STUDY_TEMPLATE":  # the template of a default study, from the settings model
        return settings_model.render_template({}, _platform_schemas())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Workspace locks this process holds, with their depth: the lock is re-entrant in a process
#: (a file lock object per call is not).
_HELD: dict[str, int] = {}


@dataclass
class Study:
    """A study directory. Use :meth:`init` to create one and :meth:`open` to use it."""

    path: Path
    config: dict = field(default_factory=dict)

    # -- creation and loading --------------------------------------------------------------
    @classmethod
    def init(cls, path, judgments, documents=None, k: int = 5, levels=None, seed: int = 2015,
             min_per_cell: int = 200, platform: str = "appen", force: bool = False,
             topics=None, values: dict | None = None) -> "Study":
        """Create a workspace: copy the inputs into ``inputs/`` and write a commented study.toml.

        Everything is checked before anything is written. ``force`` starts a study over in a
        directory that has a study.toml, but never one that holds collected answers. ``values``
        sets other keys of the new study.toml (``{"serve.completion_code": "C0DE"}``).

        Parameters
        ----------
        path : str or pathlib.Path
            The study directory (created if missing).
        judgments : str or pathlib.Path
            The relevance judgments file.
        documents : str or pathlib.Path or None, optional
            A documents table (titles, snippets, urls or audio); None (default) for none.
        k : int, optional
            Length of each result list (default 5).
        levels : list of int or None, optional
            Relevance levels lists are built from; None (default) takes the judgments'
            non-negative levels.
        seed : int, optional
            The study seed (default 2015).
        min_per_cell : int, optional
            ``generator.min_per_cell``: examples wanted per cell (default 200).
        platform : str, optional
            ``presentation.platform`` (default ``"appen"``).
        force : bool, optional
            Start over in a directory that has a study.toml (default False).
        topics : str or pathlib.Path or None, optional
            A topics file; None (default) for none.
        values : dict or None, optional
            Other study.toml keys, by dotted name.

        Returns
        -------
        Study
            The new study, opened.

        Raises
        ------
        SatcalError
            The directory holds a study (without ``force``) or collected answers, or the
            inputs are invalid.
        """
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise SatcalError(f"{path}: exists and is not a directory")
        if (path / "study.toml").exists():
            if not force:
                raise SatcalError(f"{path}/study.toml exists; pass --force to start the study over")
            collected = [n for n in ("raw", "answers.csv") if (path / n).exists()]
            _refuse_while_served(path, "init --force")
            held = served_answers(path)
            if held is not None:
                collected.append(f"{held[1]} answers not ingested yet in {held[0]}")
            if collected:
                raise SatcalError(f"{path} holds collected answers ({', '.join(collected)}); --force "
                                  "would leave them beside a new design. Start the new study in "
                                  "another directory")
        judgments = Path(judgments)
        qrels = read_judgments(judgments)  # validate before writing anything
        documents_table = _read_documents(Path(documents)) if documents is not None else None
        if topics is not None:
            from .topics import read_topics
            read_topics(topics)
        levels = list(levels) if levels is not None else [lv for lv in qrels.levels if lv >= 0]
        judgments_name = judgments.name
        documents_name = Path(documents).name if documents is not None else ""
        if documents_name and documents_name == judgments_name:
            documents_name = f"documents-{documents_name}"  # two inputs, two copies
        topics_name = Path(topics).name if topics is not None else ""
        if topics_name and topics_name in (judgments_name, documents_name):
            topics_name = f"topics-{topics_name}"
        text = settings_model.render_template({
            "study.name": path.name, "study.judgments": f"inputs/{judgments_name}",
            "study.topics": f"inputs/{topics_name}" if topics_name else "",
            "study.documents": f"inputs/{documents_name}" if documents_name else "",
            "study.k": k, "study.levels": levels, "study.seed": seed,
            "generator.min_per_cell": min_per_cell, "presentation.platform": platform,
            "presentation.items_per_page": "auto" if platform == "serve" else 10,
            "presentation.instructions": default_instructions(documents_table), **(values or {})},
            _platform_schemas())
        present = set(qrels.levels)
        if len([lv for lv in levels if lv in present]) < 2:
            raise SatcalError(f"{judgments}: the judgments use level(s) {sorted(present)}; a study "
                              "needs lists built from at least two levels (give --levels)")
        validate_config(tomllib.loads(text), path / "study.toml")
        made = not path.exists()
        path.mkdir(parents=True, exist_ok=True)
        OutputSet.recover(path)
        try:
            cls._write_init(path, text, judgments, documents, topics, judgments_name, documents_name,
                            topics_name)
        except BaseException:
            if made:  # a directory this made stays only with something in it
                try:
                    path.rmdir()
                except OSError:
                    pass
            raise
        return cls.open(path)

    @classmethod
    def _write_init(cls, path, text, judgments, documents, topics, judgments_name, documents_name,
                    topics_name) -> None:
        # the inputs and study.toml as one set: a killed init leaves the old study or the new one
        with OutputSet(path, "init") as outputs:
            for source, name in ((judgments, judgments_name), (documents, documents_name), (topics, topics_name)):
                if source is not None and name:
                    shutil.copyfile(source, outputs.file(f"inputs/{name}"))
            atomic_write_text(outputs.file("study.toml"), text)
            # the manifest in the same set: a full disk leaves no study without its record
            cls(path, validate_config(tomllib.loads(text), path / "study.toml")).record(
                "init", {"judgments": str(judgments), "documents": str(documents or ""),
                         "topics": str(topics or "")}, outputs=outputs)

    @classmethod
    def open(cls, path) -> "Study":
        """Open the study in directory ``path``, its study.toml read and validated.

        Parameters
        ----------
        path : str or pathlib.Path
            The study directory.

        Returns
        -------
        Study

        Raises
        ------
        SatcalError
            ``path`` has no study.toml, or it is not valid TOML or not a valid study.
        """
        path = Path(path)
        toml = path / "study.toml"
        if not toml.is_file():
            what = "is a directory, not a file" if toml.is_dir() else "missing"
            raise SatcalError(f"{path}: not a satcal workspace (study.toml {what}); create one with "
                              "satcal init DIR --judgments FILE")
        from .fileio import read_utf8_text
        try:
            config = tomllib.loads(read_utf8_text(toml))
        except tomllib.TOMLDecodeError as exc:
            raise SatcalError(f"{toml}: {exc}") from None
        return cls(path, validate_config(config, toml))

    # -- accessors -------------------------------------------------------------------------
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
        from .platforms import get_platform
        plat = get_platform(platform or self["presentation.platform"])
        if plat.describe is None:
            return ""
        return plat.describe(self.config["platforms"][plat.name], self["presentation.items_per_page"],
                             self["design.answers_per_example"])

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
        from .topics import read_topics
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
        from .measures import Discount, Gain, formulation, study_formulations
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
        from .fileio import spreadsheet_value
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

    @contextmanager
    def serving(self, url: str | None):
        """While the block runs, ``batches/serving.json`` names this process and its database, so
        commands that would replace the key refuse (:func:`running_server`). The entry is taken
        off at the end; a process ended by a signal (uvicorn re-raises SIGTERM after its
        shutdown) or killed leaves it behind, and an entry whose process is gone never counts.

        Parameters
        ----------
        url : str or None
            The database URL; None means ``DIR/serve.db``.
        """
        from .serve import db
        shown = _hide_password(url or db.default_url(self.path))
        marker = self.path / SERVING
        me = {"pid": os.getpid(), "database": shown}
        with self.locked():
            atomic_write_text(marker, json.dumps(_live_servers(self.path) + [me], indent=1) + "\n")
        try:
            yield
        finally:
            with self.locked():
                rest = [e for e in _live_servers(self.path) if e.get("pid") != me["pid"]]
                if rest:
                    atomic_write_text(marker, json.dumps(rest, indent=1) + "\n")
                elif marker.exists():
                    marker.unlink()

    def remember_database(self, url: str | None) -> None:
        """Note a study database ``satcal serve`` uses (a URL's password left out), so that
        commands that would replace the key it is bound to can look for answers in it.

        Parameters
        ----------
        url : str or None
            The database URL; None means ``DIR/serve.db``.
        """
        from .serve import db
        url = url or db.default_url(self.path)
        path = self.path / SERVED_DATABASES
        with self.locked():
            known = json.loads(path.read_text()) if path.exists() else []
            shown = _hide_password(url)
            if shown not in known:
                atomic_write_text(path, json.dumps(known + [shown], indent=1) + "\n")

    # -- concurrency and interrupted commands ----------------------------------------------
    @contextmanager
    def locked(self):
        """Hold the workspace lock (``.satcal.lock``): one writing command at a time.

        Re-entrant within a process. Another process's command is waited for, with a line on
        stderr, up to ``LOCK_WAIT`` seconds.
        """
        from filelock import FileLock, Timeout
        key = str((self.path / ".satcal.lock").resolve())
        if _HELD.get(key):  # this process holds it already (a command calling a stage)
            _HELD[key] += 1
            try:
                yield self
            finally:
                _HELD[key] -= 1
            return
        lock = FileLock(key)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            print(f"satcal: waiting for another satcal command working on {self.path} ...",
                  file=sys.stderr, flush=True)
            try:
                lock.acquire(timeout=LOCK_WAIT)
            except Timeout:
                raise SatcalError(f"{self.path}: another satcal command has held the workspace "
                                  f"for over {LOCK_WAIT} s; let it finish, or stop it and run "
                                  "this one again") from None
        _HELD[key] = 1
        try:
            OutputSet.recover(self.path)  # finish or discard what a killed command left
            yield self
        finally:
            _HELD.pop(key, None)
            lock.release()

    @contextmanager
    def staged(self, command: str):
        """``command``'s outputs as one set (:class:`~satcal.fileio.OutputSet`): written aside,
        then moved into place together, so a killed command leaves the old set or the new one,
        never half of each.

        Parameters
        ----------
        command : str
            The command's name, naming the set.

        Yields
        ------
        satcal.fileio.OutputSet
        """
        with OutputSet(self.path, command) as outputs:
            yield outputs

    # -- manifest --------------------------------------------------------------------------
    def record(self, command: str, details: dict | None = None, inputs: list[Path] | None = None,
               outputs: OutputSet | None = None) -> None:
        """Append to manifest.json: versions, seeds, input hashes and the command (into
        ``outputs`` when the record belongs to a set of outputs).

        Parameters
        ----------
        command : str
            The command's name.
        details : dict or None, optional
            What to record with it in the history.
        inputs : list of pathlib.Path or None, optional
            Files hashed besides the judgments and documents.
        outputs : satcal.fileio.OutputSet or None, optional
            The set the manifest belongs to; None writes manifest.json at once.
        """
        path = self.path / "manifest.json"
        target = outputs.file("manifest.json") if outputs is not None else path
        manifest = json.loads(path.read_text()) if path.exists() else {"history": [], "inputs": {}}
        manifest["satcal_version"] = __version__
        manifest["python"] = sys.version.split()[0]
        manifest["platform"] = _platform.platform()
        manifest["packages"] = _package_versions()
        manifest["seeds"] = {"study": self.seed}
        files = [self.path / self["study.judgments"]]
        if self["study.documents"]:
            files.append(self.path / self["study.documents"])
        files += list(inputs or [])
        for f in map(Path, files):
            # a file of this set is recorded under the name it will have once committed, with
            # the content it will have then
            name = outputs.final(f) if outputs is not None and f.is_relative_to(outputs.stage / "new") else f
            if outputs is not None and f.is_relative_to(self.path) and not f.is_relative_to(outputs.stage):
                staged = outputs.stage / "new" / f.relative_to(self.path)
                f = staged if staged.exists() else f
            if f.exists():
                manifest["inputs"][str(name.relative_to(self.path) if name.is_relative_to(self.path) else name)] = sha256_file(f)
        manifest["history"].append({"command": command, "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                    **({"details": details} if details else {})})
        atomic_write_text(target, json.dumps(manifest, indent=2, sort_keys=True) + "\n")

    # -- stages ----------------------------------------------------------------------------
    def generate(self, force: bool = False, progress: bool = False):
        """Examples, traps, scores, coverage table and heat map.

        Parameters
        ----------
        force : bool, optional
            Overwrite earlier outputs (default False).
        progress : bool, optional
            Show progress (default False).
        """
        with self.locked():
            return self._generate(force, progress)

    def _generate(self, force: bool, progress: bool):
        from .generate import Design, coverage_heatmap, generate
        from .traps import build_traps, read_traps
        self.refuse_if_collected("generate")
        self.guard(["examples.csv", "traps.csv", "scores.csv", "coverage.csv"], force)
        judgments = self.judgments()
        family, every = self.formulations(extra=False), self.formulations()
        design = Design(k=self.k, levels=self["study.levels"], formulations=family,
                        extra=every[len(family):], cover_extra=self["generator.cover_extra"],
                        n_bins=self["generator.n_bins"], min_per_cell=self["generator.min_per_cell"],
                        overlap=self["generator.overlap"], method=self["generator.method"], seed=self.seed,
                        max_query_share=float(self["generator.max_query_share"]))
        if self["traps.file"]:
            if (self.path / self["traps.file"]).resolve() == self.file("traps.csv").resolve():
                raise SatcalError(f"{self.path}/study.toml: traps.file = 'traps.csv' is the name of the "
                                  "generated traps table; rename your traps file (e.g. my-traps.csv)")
            traps = read_traps(self.path / self["traps.file"], judgments, self.k, levels=self["study.levels"])
        else:
            traps = build_traps(judgments, self.k, self["traps.count"], seed=stream_seed(self.seed, "traps"),
                                levels=self["study.levels"])
        result = generate(judgments, design, progress=progress)
        if self["design.adaptive"]:  # adaptive: the examples are the candidate pool waves draw from
            from .adaptive_study import adopt_pool
            adopt_pool(self, result, judgments, design)
        # query and document ids are the user's: no cell may run as a formula in a spreadsheet
        # (read back through table(), which gives the values as they were)
        csv = lambda df: spreadsheet_safe(df).to_csv(index=False, lineterminator="\n", float_format="%.10g")
        with self.staged("generate") as outputs:
            atomic_write_text(outputs.file("examples.csv"), csv(result.examples))
            atomic_write_text(outputs.file("traps.csv"), csv(traps))
            atomic_write_text(outputs.file("scores.csv"), csv(result.scores))
            atomic_write_text(outputs.file("coverage.csv"), csv(result.coverage))
            if self["design.adaptive"]:
                atomic_write_text(outputs.file("pool.csv"), csv(result.examples))
            outputs.file("coverage.png"), outputs.file("coverage.pdf")
            coverage_heatmap(result.coverage, design.min_per_cell, outputs.file("coverage"))
            atomic_write_text(outputs.file(DESIGN_FILE), json.dumps(
                {"k": self.k, "levels": list(self["study.levels"])}, indent=1) + "\n")
            self.record("generate", {"seed": self.seed, **result.as_dict(),
                                     "traps": traps.attrs.get("built", f"{len(traps)} traps from {self['traps.file']}")},
                        outputs=outputs)
        result.traps_built = traps.attrs.get("built", f"{len(traps)} traps read from {self['traps.file']}")
        return result

    def export(self, platform: str | None = None, force: bool = False, new_batch: bool = False,
               next_batch: bool = False):
        """Platform task files under batches/<platform>/ and the hidden key.csv.

        Each batch (a presentation of the examples: opaque ids, orientation, pages) keeps its
        key under ``batches/keys/batch-<n>.csv``, and ingest resolves item ids across all of
        them. Once answers are collected, the current batch can be exported again (to another
        platform, say), and ``new_batch`` starts the next one; nothing replaces a key that
        collected answers refer to.

        Parameters
        ----------
        platform : str or None, optional
            Platform name; None (default) takes ``presentation.platform`` of study.toml.
        force : bool, optional
            Replace a key without collected answers (default False).
        new_batch : bool, optional
            Start the next batch of the whole study (default False).
        next_batch : bool, optional
            Export the adaptive study's next wave (default False).

        Returns
        -------
        list of pathlib.Path
            The platform files written.

        Raises
        ------
        SatcalError
            Both ``new_batch`` and ``next_batch``, or a key that answers refer to would change.
        """
        if next_batch and new_batch:
            raise SatcalError("give --new-batch (the whole study again) or --next-batch (an adaptive wave), not both")
        if next_batch:  # adaptive: the next wave, chosen from the answers so far
            from .adaptive_study import export_next
            return export_next(self, platform)
        with self.locked():
            return self._export(platform, force, new_batch)

    def batch_number(self) -> int:
        """The current batch (0 before the first export)."""
        key = self.table("key.csv", required=False)
        if key is None:
            return 0
        return int(key["batch"].iloc[0]) if "batch" in key.columns and len(key) else 1

    def _export(self, platform: str | None, force: bool, new_batch: bool = False, wave=None):
        from .platforms import build_items, get_platform
        plat = get_platform(platform or self["presentation.platform"])
        out = self.path / "batches" / plat.name
        current = self.batch_number()
        batch = current + 1 if new_batch or current == 0 else current
        collected = self.collected()
        held = None if collected else served_answers(self.path)
        if not collected:
            self.guard([f"batches/{plat.name}"] if out.exists() and any(out.iterdir()) and not new_batch else [],
                       force)
        examples = self.table("examples.csv") if wave is None else wave.examples
        traps = self.table("traps.csv", required=False) if wave is None else wave.traps
        traps = traps if traps is not None else pd.DataFrame()
        # batch 1 keeps the seed of earlier versions, so existing keys are reproduced
        documents, topics = self.documents(), self.topics()
        per_page = self["presentation.items_per_page"] if wave is None else wave.items_per_page
        build = lambda n: build_items(examples, traps, self.k, seed=stream_seed(self.seed, "export", batch - 1),
                                      items_per_page=n, documents=documents, swap=self["presentation.swap"],
                                      topics=topics)
        visible, key = build(10 if per_page == "auto" else per_page)
        if per_page == "auto":  # by reading load: the items' text decides how many fit a page
            from .platforms.serve import auto_items_per_page
            per_page = auto_items_per_page(visible, self.k)
            visible, key = build(per_page)
        _warn_bare_ids(visible, self.path)
        key["batch"] = batch
        existing_key = self.table("key.csv", required=False)
        same = existing_key is not None and existing_key.drop(columns=["batch"], errors="ignore").equals(
            key.drop(columns=["batch"]).astype(str))
        if existing_key is not None and not same and not new_batch:
            _refuse_while_served(self.path, "export --force")
            if held is not None:
                url, n = held
                raise SatcalError(f"{url} holds {n} answers to this study's key.csv, not ingested yet, and "
                                  "key.csv would change, even with --force. Ingest them first "
                                  f"({_ingest_served(self.path, url)}), or start a new batch and keep "
                                  f"this key: satcal export {self.path} --new-batch")
            if collected:
                raise SatcalError(f"{self.path} holds collected answers and key.csv would change (the "
                                  "examples, documents or presentation settings changed), even with "
                                  f"--force. To present the examples again, start a new batch: satcal "
                                  f"export {self.path} --new-batch")
            if not force:
                raise SatcalError(f"{self.path}/key.csv holds another presentation; pass --force to "
                                  "replace it, or --new-batch to keep it and start another")
        with self.staged("export") as outputs:
            # spreadsheet-safe like every table of the workspace; the platform's own upload
            # files (written by plat.write_batch) keep the values the platform shows
            text = spreadsheet_safe(key).to_csv(index=False, lineterminator="\n")
            atomic_write_text(outputs.file(f"batches/keys/batch-{batch}.csv"), text)
            atomic_write_text(outputs.file("key.csv"), text)
            atomic_write_text(outputs.file("items.csv"),
                              spreadsheet_safe(visible).to_csv(index=False, lineterminator="\n"))
            staged_out = outputs.dir(f"batches/{plat.name}")
            settings = {"settings": self.config["platforms"][plat.name]} if plat.settings else {}
            written = plat.write_batch(visible, key, staged_out, self.k, self["presentation.instructions"],
                                       per_page,
                                       answers_per_example=self["design.answers_per_example"], **settings)
            self.record("export", {"platform": plat.name, "items": len(visible), "batch": batch,
                                   **({"wave_examples": len(examples)} if wave is not None else {})},
                        outputs=outputs)
        return [out / Path(p).relative_to(staged_out) for p in written]

    def keys(self) -> pd.DataFrame | None:
        """Every batch's key in one table (item ids are unique across batches), for ingest."""
        frames = [spreadsheet_value(pd.read_csv(p, dtype=str, keep_default_na=False))
                  for p in sorted((self.path / "batches" / "keys").glob("batch-*.csv"))]
        current = self.table("key.csv", required=False)
        if current is not None:
            frames.append(current)
        if not frames:
            return None
        table = pd.concat(frames, ignore_index=True).drop_duplicates()
        clash = table["item_id"].duplicated(keep=False)
        if clash.any():
            raise SatcalError(f"{self.path}/batches/keys: item id {table.loc[clash, 'item_id'].iloc[0]!r} means "
                              "different things in two batch keys; restore the keys as exported")
        return table.reset_index(drop=True)

    def preview(self, n: int = 6, path: Path | None = None, force: bool = False) -> Path:
        """A static page with a sample of units exactly as a worker sees them (preview.html is
        kept unless ``force``).

        Parameters
        ----------
        n : int, optional
            Number of units shown (default 6).
        path : pathlib.Path or None, optional
            Where to write; None (default) writes ``preview.html`` in the study.
        force : bool, optional
            Overwrite preview.html (default False).

        Returns
        -------
        pathlib.Path
            The page written.
        """
        with self.locked():
            if path is None:
                self.guard(["preview.html"], force)
            return self._preview(n, path)

    def _preview(self, n: int, path: Path | None) -> Path:
        from .platforms import render_form_html
        visible = self.table("items.csv")
        key = self.table("key.csv")
        rng = np.random.default_rng(stream_seed(self.seed, "preview"))
        # Show at least one trap, as workers meet them among the examples.
        traps = key.index[key["is_trap"] == "True"].to_numpy()
        picks = list(rng.choice(len(visible), size=min(n, len(visible)), replace=False))
        if traps.size and not set(picks) & set(traps):
            picks[-1] = int(rng.choice(traps))
        sample = visible.iloc[sorted(picks)]
        target = path or self.file("preview.html")
        atomic_write_text(target, render_form_html(sample, self.k, self["presentation.instructions"],
                                            f"Preview: {self['study.name']}"))
        return target

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
        from .analysis import calibrate
        self.repair_interrupted_ingest()
        previous = self.path / "analysis"
        if previous.exists() and any(previous.iterdir()):
            self.guard(["analysis"], force)
        study = self.study_data()
        kwargs.setdefault("formulations", self.formulations())
        result = calibrate(study, **kwargs)
        result.workers = self.table("workers.csv", required=False)
        result.trap_report = self.table("traps_report.csv", required=False)
        result.meta["provenance"].update(
            judgments_sha256=sha256_file(self.path / self["study.judgments"]),
            answers_sha256=sha256_file(self.file("answers.csv")), simulated=self.answers_simulated())
        result.meta["simulated"] = result.meta["provenance"]["simulated"]
        result.meta["simulated_share"] = result.meta["provenance"]["simulated_share"] = self.simulated_share()
        rejects = self.table("rejects.csv", required=False)
        if rejects is not None:
            result.meta["rejected_rows"] = int(len(rejects))
        from .quality import agreement
        agreed = agreement(study.examples)
        counts = study.examples.groupby("example_id").size()
        result.meta["crowd"] = {"answers": int(len(study.examples)), "examples": int(len(counts)),
                                "answers_per_example_design": self["design.answers_per_example"],
                                "answers_per_example_mean": float(counts.mean()),
                                **({"agreement": agreed.as_dict()} if agreed is not None else {})}
        if self["design.adaptive"]:  # the stopping rule's verdict, in calibration.json and the report
            from .adaptive_study import calibration_record
            result.meta["provenance"]["adaptive"] = calibration_record(self, result)
        from .report import write_analysis
        with self.staged("analyze") as outputs:
            write_analysis(result, outputs.dir("analysis"))
            self.record("analyze", {**{k: v for k, v in kwargs.items() if k in ("population", "bootstrap", "seed")},
                                    "formulations": result.bias["formulation"].tolist()}, outputs=outputs)
        return result

    # -- answers: the simulated crowd, ingest, the hosted study -----------------------------
    def study_data(self):
        """The ingested, non-trap answers of kept workers with both lists' levels
        (:class:`~satcal.answers.StudyData`)."""
        from .ingest import study_data
        s = self.settings.study
        return study_data(self.table("answers.csv"), self.table("examples.csv"), s.k, s.levels,
                          self.judgments(), name=s.name, where=self.file("answers.csv"))

    def user_model(self, stream: str = "simulate"):
        """The simulated crowd of ``[simulation]`` (every key), seeded by the named stream.

        Parameters
        ----------
        stream : str, optional
            Name of the seed stream (default ``"simulate"``).

        Returns
        -------
        satcal.simulate.UserModel
        """
        from .simulate import UserModel
        return UserModel.from_settings(self.settings.simulation, stream_seed(self.seed, stream))

    def lists(self) -> pd.DataFrame:
        """Examples and traps in one table of lists under their ``source_id``."""
        from .simulate import study_lists
        return study_lists(self.table("examples.csv"), self.table("traps.csv", required=False))

    def simulate(self, platform: str | None = None, force: bool = False, model=None):
        """The simulated crowd's result file ``simulated/<platform>-results.<ext>`` and its truth
        ``simulated/<platform>-truth.json``, as one set. Returns (path, truth).

        Parameters
        ----------
        platform : str or None, optional
            Platform name; None (default) takes ``presentation.platform`` of study.toml.
        force : bool, optional
            Overwrite an earlier simulated result file (default False).
        model : satcal.simulate.UserModel or None, optional
            The crowd; None (default) takes :meth:`user_model`.
        """
        from .platforms import get_platform
        from .simulate import simulate_results
        with self.locked():
            plat = get_platform(platform or self["presentation.platform"])
            out = self.path / "simulated" / f"{plat.name}-results.{plat.result_suffix}"
            if plat.write_results is not None:
                self.guard([str(out.relative_to(self.path))], force)
            items, key = self.table("items.csv"), self.table("key.csv")
            model = model or self.user_model()
            answers, truth = simulate_results(items, key, self.lists(), self.k, max(self["study.levels"]), model,
                                              self["design.answers_per_example"], plat)
            with self.staged("simulate") as outputs:  # results and truth as one set
                plat.write_results(answers, items, key, outputs.file(out.relative_to(self.path)))
                atomic_write_text(outputs.file(f"simulated/{plat.name}-truth.json"),
                                  json.dumps(truth, indent=1) + "\n")
                self.record("simulate", {"platform": plat.name, "answers": len(answers), "seed": model.seed},
                            outputs=outputs)
        return out, truth

    def simulate_served(self, url: str, concurrency: int = 8, progress: bool = False, model=None):
        """Send the simulated crowd through the hosted study running at ``url``; the truth goes
        to ``simulated/serve-truth.json``. Returns (visits, truth).

        Parameters
        ----------
        url : str
            Address of the running hosted study.
        concurrency : int, optional
            Participants simulated at once (default 8).
        progress : bool, optional
            Show progress (default False).
        model : satcal.simulate.UserModel or None, optional
            The crowd; None (default) takes :meth:`user_model`.

        Raises
        ------
        SatcalError
            A simulated participant failed.
        """
        from .simulate import simulate_served
        model = model or self.user_model()
        visits, truth = simulate_served(url, self.table("items.csv"), self.table("key.csv"), self.lists(), self.k,
                                        max(self["study.levels"]), model, sha256_file(self.file("key.csv")),
                                        concurrency=concurrency, progress=progress)
        if truth["errors"]:
            raise SatcalError(f"{len(truth['errors'])} simulated participants failed, first: {truth['errors'][0]}")
        with self.locked():
            (self.path / "simulated").mkdir(exist_ok=True)
            atomic_write_text(self.path / "simulated" / "serve-truth.json", json.dumps(truth, indent=1) + "\n")
            self.record("simulate", {"served_at": url, "participants": len(visits), "pages": truth["pages"]})
        return visits, truth

    def ingest(self, files, platform: str | None = None, threshold: float | None = None):
        """Archive result files under raw/ and rebuild answers.csv, rejects.csv, workers.csv and
        traps_report.csv (:class:`~satcal.ingest.IngestReport`).

        Every file is parsed before anything is written, so a broken file leaves the study
        untouched. A file already ingested (same content hash) changes nothing; the tables are
        rebuilt from all archived files, so the result does not depend on the order of calls.
        The lock makes concurrent ingests take turns. The archived files, the index and the
        tables are written as one set (:class:`~satcal.fileio.OutputSet`), so an ingest killed
        at any moment, or failing on a full disk, leaves the study as it was before or as it is
        after, never a mix.

        Parameters
        ----------
        files : iterable of path
            The result files.
        platform : str or None, optional
            Platform name; None (default) takes ``presentation.platform`` of study.toml.
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        """
        from .ingest import SETTINGS, SUPERSEDED, index_rows, read_result_files, supersede_snapshots
        from .fileio import atomic_write_bytes
        with self.locked():
            self.repair_interrupted_ingest()
            raw_dir = self.path / "raw"
            index = self._raw_index()
            new_files = read_result_files(files, platform, set(index["sha256"]))
            added = index_rows(new_files)
            parsed = {r.sha256: r.rows for r in new_files}
            index, superseded = supersede_snapshots(raw_dir, index, added, parsed)
            threshold = self["quality.trust_threshold"] if threshold is None else float(threshold)
            with self.staged("ingest") as outputs:
                for r in new_files:
                    atomic_write_bytes(outputs.file(f"raw/{r.name}"), r.data)
                if new_files:
                    index = pd.concat([index, added], ignore_index=True)
                report = self._rebuild(index, parsed, threshold, outputs)
                # the tables' threshold, so that a repair rebuilds exactly these tables
                atomic_write_text(outputs.file(f"raw/{SETTINGS}"), json.dumps({"trust_threshold": threshold}) + "\n")
                if new_files:
                    if len(superseded):
                        previous = raw_dir / SUPERSEDED
                        old = pd.read_csv(previous, dtype=str, keep_default_na=False) if previous.exists() else None
                        table = pd.concat([old, superseded], ignore_index=True) if old is not None else superseded
                        atomic_write_text(outputs.file(f"raw/{SUPERSEDED}"),
                                          table.to_csv(index=False, lineterminator="\n"))
                    atomic_write_text(outputs.file("raw/index.csv"), index.to_csv(index=False, lineterminator="\n"))
                    self.record("ingest", {"files": [r.name for r in new_files], "answers": len(report.answers),
                                           "rejects": len(report.rejects)},
                                inputs=[outputs.file(f"raw/{r.name}") for r in new_files], outputs=outputs)
        return report

    def _raw_index(self) -> pd.DataFrame:
        from .ingest import INDEX_COLUMNS
        path = self.path / "raw" / "index.csv"
        return (pd.read_csv(path, dtype=str, keep_default_na=False) if path.exists()
                else pd.DataFrame(columns=INDEX_COLUMNS))

    def _rebuild(self, index: pd.DataFrame, parsed: dict, threshold, outputs):
        """The ingest tables from every file of ``index``, written into ``outputs``."""
        from .fileio import write_csv_safe
        from .ingest import INGEST_TABLES, rebuild
        s = self.settings
        report = rebuild(index, parsed, self.path / "raw", self.keys(), self.table("examples.csv", required=False),
                         self.table("items.csv", required=False), self.k, s.quality, s.serve, threshold)
        for name, attr in INGEST_TABLES.items():
            write_csv_safe(outputs.file(name), getattr(report, attr))  # pandas' bytes, by Arrow when it can
        return report

    def remove(self, name: str, threshold: float | None = None):
        """Take one archived result file back out: it leaves the index (the file itself moves to
        ``raw/removed/``, never deleted) and the tables are rebuilt from the other files, all as
        one output set. ``name`` is the archived name, the original name or a hash prefix.
        Returns (archived name, :class:`~satcal.ingest.IngestReport`).

        Parameters
        ----------
        name : str
            The file's archived name, original name or hash prefix.
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        """
        from .fileio import atomic_write_bytes
        from .ingest import INDEX_COLUMNS, REMOVED, SETTINGS, find_archived
        with self.locked():
            self.repair_interrupted_ingest()
            raw_dir = self.path / "raw"
            index = self._raw_index()
            row = find_archived(index, name, raw_dir)
            threshold = self["quality.trust_threshold"] if threshold is None else float(threshold)
            with self.staged("ingest") as outputs:
                source = raw_dir / row["file"]
                if source.exists():
                    atomic_write_bytes(outputs.file(f"raw/{REMOVED}/{row['file']}"), source.read_bytes())
                    outputs.delete(f"raw/{row['file']}")
                index = index[index["file"] != row["file"]].reset_index(drop=True)
                atomic_write_text(outputs.file("raw/index.csv"),
                                  index[INDEX_COLUMNS].to_csv(index=False, lineterminator="\n"))
                report = self._rebuild(index, {}, threshold, outputs)
                atomic_write_text(outputs.file(f"raw/{SETTINGS}"), json.dumps({"trust_threshold": threshold}) + "\n")
                self.record("ingest --remove", {"file": row["file"], "answers": len(report.answers),
                                                "rejects": len(report.rejects)}, outputs=outputs)
            return row["file"], report

    def repair_interrupted_ingest(self) -> bool:
        """Finish what an ingest or a removal of an older satcal left when it was killed (its
        marker file is still there): an ingest's files leave raw/ and the index, a removal's
        tables are rebuilt from the index, as one output set. Ingests of this version are output
        sets themselves, which taking the lock finishes or discards. Returns whether anything
        was repaired."""
        from .ingest import INDEX_COLUMNS, PENDING, REBUILD, SETTINGS, read_pending
        raw_dir = self.path / "raw"
        marker, rebuild = raw_dir / PENDING, raw_dir / REBUILD
        if not marker.exists() and not rebuild.exists():
            return False
        with self.locked():
            settings = raw_dir / SETTINGS
            threshold = json.loads(settings.read_text())["trust_threshold"] if settings.exists() else None
            index = self._raw_index()
            with self.staged("ingest") as outputs:
                if marker.exists():
                    pending = read_pending(marker)
                    index = index[~index["sha256"].isin(pending["sha256"])].reset_index(drop=True)
                    for name in pending["file"]:
                        outputs.delete(f"raw/{name}")
                    outputs.delete(f"raw/{PENDING}")
                    atomic_write_text(outputs.file("raw/index.csv"),
                                      index[INDEX_COLUMNS].to_csv(index=False, lineterminator="\n"))
                outputs.delete(f"raw/{REBUILD}")
                self._rebuild(index, {}, threshold, outputs)
        return True

    def snapshot_served(self, url: str | None, directory) -> Path:
        """The hosted study's responses (database ``url``, default ``DIR/serve.db``) as a file in
        ``directory``, ready to ingest with platform ``serve``.

        Parameters
        ----------
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.
        directory : path
            Where to write the file.

        Returns
        -------
        pathlib.Path
        """
        from .ingest import snapshot_served
        from .serve import db
        return snapshot_served(url or db.default_url(self.path), directory, self.path)

    def dawid_skene(self, report):
        """Dawid-Skene worker accuracies from every worker's answers of an ingest (those trap
        trust excluded too), into workers_ds.csv and workers.csv's ``ds_accuracy``.

        Parameters
        ----------
        report : satcal.ingest.IngestReport
            The ingest's report (its ``before_exclusion`` answers are used).

        Raises
        ------
        SatcalError
            No example has two answers or more.
        """
        from .quality import dawid_skene
        everyone = report.before_exclusion
        repeated = everyone[~everyone["is_trap"].astype(bool)].groupby("example_id").size()
        if not (repeated >= 2).any():
            raise SatcalError("Dawid-Skene estimates workers from examples that several workers answered; "
                              "in these answers every example has one, so it cannot estimate anything. "
                              "Set [design] answers_per_example to 2 or more (trap-based trust is in "
                              "workers.csv)")
        _, accuracy = dawid_skene(everyone)
        with self.locked(), self.staged("dawid-skene") as outputs:
            atomic_write_text(outputs.file("workers_ds.csv"),
                              spreadsheet_safe(accuracy).to_csv(index=False, lineterminator="\n"))
            # beside trap trust in workers.csv, so one table says all about a worker
            workers = report.workers.drop(columns=["ds_accuracy"], errors="ignore").merge(
                accuracy, on="worker_id", how="left")
            atomic_write_text(outputs.file("workers.csv"),
                              spreadsheet_safe(workers).to_csv(index=False, lineterminator="\n"))
        return accuracy

    def drop_traps(self, ids) -> None:
        """Leave the traps ``ids`` out of trust for this study object's commands (not written
        to study.toml), after checking that each names a trap of traps.csv.

        Parameters
        ----------
        ids : iterable of str
            Trap ids of traps.csv.

        Raises
        ------
        SatcalError
            An id is not in traps.csv.
        """
        traps = self.table("traps.csv", required=False)
        known = set(traps["trap_id"]) if traps is not None else set()
        unknown = [t for t in ids if t not in known]
        if unknown:
            raise SatcalError(f"--drop-trap {unknown[0]}: no such trap in {self.path}/traps.csv"
                              + (f" (traps are {min(known)} to {max(known)})" if known else ""))
        self.config["quality"]["drop_traps"] = sorted(set(self.config["quality"]["drop_traps"]) | set(ids))

    def serve_settings(self):
        """What the hosted study reads of study.toml (:class:`~satcal.serve.ServeSettings`)."""
        from .serve.study import ServeSettings
        return ServeSettings.from_settings(self.settings)

    def serve_warnings(self) -> list[str]:
        """Why the exported batch cannot score every participant of the hosted study on traps."""
        from .serve.study import batch_warnings
        return batch_warnings(self.table("items.csv"), self.table("key.csv"), self.serve_settings())

    def hosted_study(self, url: str | None = None):
        """The hosted study of the exported batch, its answers in the database at ``url``
        (default ``DIR/serve.db``).

        Parameters
        ----------
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.

        Returns
        -------
        satcal.serve.HostedStudy
        """
        from .serve import HostedStudy, db
        items = self.table("items.csv")
        key = self.table("key.csv")  # refuses with "run satcal export first" when missing
        study = HostedStudy.from_batch(items, key, self.serve_settings(), db.connect(url or db.default_url(self.path)),
                                       sha256_file(self.file("key.csv")))
        from .adaptive_study import attach
        attach(self, study)  # adaptive: pages in the criterion's order, refitted in the background
        return study

    def serve_app(self, url: str | None = None, https_only: bool = False):
        """The ASGI application of the hosted study (Starlette).

        Parameters
        ----------
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.
        https_only : bool, optional
            Send cookies over HTTPS only (default False).
        """
        from .serve import create_app
        return create_app(self.hosted_study(url), https_only=https_only)

    def run_server(self, study, host: str, port: int, url: str | None = None, workers: int = 1,
                   https_only: bool = False) -> None:
        """Serve ``study`` (:meth:`hosted_study`) with uvicorn until stopped; several worker
        processes each build their own from this directory (:func:`served_app`).

        Parameters
        ----------
        study : satcal.serve.HostedStudy
            The hosted study (used when ``workers`` is 1).
        host : str
            Address to listen on.
        port : int
            Port to listen on.
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.
        workers : int, optional
            Number of server processes (default 1).
        https_only : bool, optional
            Send cookies over HTTPS only (default False).
        """
        import uvicorn
        from .serve import create_app
        if workers == 1:
            uvicorn.run(create_app(study, https_only=https_only), host=host, port=port, log_level="warning",
                        proxy_headers=True, server_header=False)
            return
        study.engine.dispose()
        os.environ.update({"SATCAL_SERVE_DIR": str(self.path.resolve()), "SATCAL_SERVE_DB": url or "",
                           "SATCAL_SERVE_HTTPS_ONLY": "1" if https_only else "0"})
        uvicorn.run("satcal.study:served_app", factory=True, host=host, port=port, workers=workers,
                    log_level="warning", proxy_headers=True, server_header=False)

    def ingest_served(self, url: str | None = None, threshold: float | None = None):
        """Ingest a snapshot of the hosted study's database (``url``, default ``DIR/serve.db``):
        it replaces the earlier snapshot of the same database.

        Parameters
        ----------
        url : str or None, optional
            Database URL of the hosted study; None (default) means ``DIR/serve.db``.
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        """
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            return self.ingest([self.snapshot_served(url, tmp)], platform="serve", threshold=threshold)

    def remove_alone(self, name: str, threshold: float | None = None, files=(), platform: str | None = None):
        """``satcal ingest --remove``: :meth:`remove`, refused beside result files or a platform
        to ingest (one command does one of the two).

        Parameters
        ----------
        name : str
            The archived file to remove (see :meth:`remove`).
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        files : sequence, optional
            Result files given with it (must be empty).
        platform : str or None, optional
            Platform given with it (must be None).

        Raises
        ------
        SatcalError
            ``files`` or ``platform`` is given.
        """
        if files or platform:
            raise SatcalError("--remove takes one archived file back out: give no files or --platform with it")
        return self.remove(name, threshold)

    def ingest_any(self, files=(), platform: str | None = None, threshold: float | None = None,
                   url: str | None = None, rebuild: bool = False, dawid_skene: bool = False):
        """``satcal ingest``: the result ``files``, or with platform ``serve`` and no files a
        snapshot of the hosted study's database ``url`` (:meth:`ingest_served`); with no files
        and ``rebuild`` (traps dropped), the tables rebuilt from the files ingested before.
        ``dawid_skene`` checks, before anything is written, that crowd-kit is installed.

        Parameters
        ----------
        files : sequence of path, optional
            The result files (default none).
        platform : str or None, optional
            Platform of the files; ``"serve"`` reads the hosted study's database.
        threshold : float or None, optional
            Trap trust below which a worker is excluded; None (default) takes
            ``quality.trust_threshold`` of study.toml.
        url : str or None, optional
            Database of the hosted study (only with platform ``serve``).
        rebuild : bool, optional
            With no files, rebuild the tables from the files ingested before (default False).
        dawid_skene : bool, optional
            Check that crowd-kit is installed (default False).

        Raises
        ------
        SatcalError
            ``url`` without platform ``serve``, or nothing to ingest.
        """
        if url and platform != "serve":
            raise SatcalError("--db reads a hosted study's database: give it with --platform serve")
        if not files and platform != "serve" and not rebuild:
            raise SatcalError("give the result files to ingest (or --platform serve to read the hosted "
                              "study's database)")
        if dawid_skene:
            from .quality import require_crowdkit
            require_crowdkit()
        if not files and platform == "serve":
            return self.ingest_served(url, threshold)
        return self.ingest(files, platform=platform, threshold=threshold)

    # -- power -----------------------------------------------------------------------------
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
        from .analysis.power import power_analysis
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


def _alive(pid: int) -> bool:
    try:
        os.kill(int(pid), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # it exists, under another user
        pass
    return True


def _live_servers(path: Path) -> list[dict]:
    """The entries of ``batches/serving.json`` whose process still runs (a killed server's
    entry stays behind and is ignored)."""
    marker = Path(path) / SERVING
    try:
        entries = json.loads(marker.read_text()) if marker.exists() else []
    except (OSError, ValueError):
        return []
    return [e for e in entries if _alive(e.get("pid", -1))]


def running_server(path: Path) -> dict | None:
    """A ``satcal serve`` still running on the study at ``path``, or None.

    Parameters
    ----------
    path : pathlib.Path
        The study directory.

    Returns
    -------
    dict or None
        The entry of ``batches/serving.json`` (``pid``, ``database``) of a live process.
    """
    return next(iter(_live_servers(path)), None)


def _refuse_while_served(path: Path, command: str) -> None:
    """Replacing the key under a running hosted study would orphan every answer stored after
    it (they are bound to the old key): refuse until the server is stopped."""
    live = running_server(path)
    if live is not None:
        raise SatcalError(f"satcal serve is running on {path} (process {live['pid']}, database "
                          f"{live['database']}); {command} would replace the key its participants are "
                          "answering, even with --force. Stop the server first, then ingest its answers "
                          f"({_ingest_served(Path(path), live['database'])})")


def _hide_password(url: str) -> str:
    from sqlalchemy.engine import make_url
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: kept as given (connect() will say why)
        return url


def _ingest_served(path: Path, url: str) -> str:
    from .serve import db
    own = url == _hide_password(db.default_url(path))
    return f"satcal ingest {path} --platform serve" + ("" if own else f" --db {url}")


def served_answers(path: Path) -> tuple[str, int] | None:
    """The first study database of the workspace at ``path`` (``DIR/serve.db`` and those
    ``satcal serve`` noted) that holds answers to the current key.csv, with their number;
    None if none does. Answers to another key are not counted: that key is kept under
    batches/keys/ (an earlier batch) or was never served.

    Parameters
    ----------
    path : pathlib.Path
        The study directory.

    Returns
    -------
    tuple of (str, int) or None
        The database URL (password hidden) and its number of answers.
    """
    key = path / "key.csv"
    if not key.exists():
        return None
    from .serve import db
    urls = [db.default_url(path)]
    noted = path / SERVED_DATABASES
    if noted.exists():
        urls += [u for u in json.loads(noted.read_text()) if u not in urls]
    digest = sha256_file(key)
    for url in urls:
        n = _responses_to(url, digest)
        if n:
            return _hide_password(url), n
    return None


def _responses_to(url: str, digest: str) -> int:
    """Item responses stored in the database at ``url`` while it was bound to the key of hash
    ``digest`` (0 for a missing SQLite file or a database of another key)."""
    from sqlalchemy import func, inspect, select
    from sqlalchemy.exc import SQLAlchemyError
    from .serve import db
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).exists():
        return 0
    engine = db.connect(url)
    try:
        if not inspect(engine).has_table("satcal_meta"):
            return 0
        t = db.tables()
        with engine.connect() as conn:
            bound = conn.execute(select(t["meta"].c.value).where(t["meta"].c.name == "key_sha256")).scalar()
            if bound != digest:
                return 0
            return int(conn.execute(select(func.count()).select_from(t["responses"])
                                    .where(t["responses"].c.kind == "item")).scalar_one())
    except SQLAlchemyError as exc:
        what = (f"if it is gone, remove it from {SERVED_DATABASES}" if not url.startswith("sqlite:///")
                else "if it is not a study database, move it away")
        raise SatcalError(f"{_hide_password(url)}: cannot read this study database to look for answers "
                          f"({str(getattr(exc, 'orig', exc)).strip()}); ingest its answers first, or, {what}") from None
    finally:
        engine.dispose()


def _warn_bare_ids(visible: pd.DataFrame, path: Path) -> None:
    """Workers shown only ids cannot judge anything: say so (a warning: an id may be all a
    study of, say, known-item music tracks needs)."""
    import warnings
    from .errors import SatcalWarning
    if "query_title" not in visible.columns:
        warnings.warn(f"{path}: workers will see query ids (e.g. {visible['query'].iloc[0]!r}) with no "
                      "text: give a topics file (satcal init --topics, or topics = ... in study.toml)",
                      SatcalWarning, stacklevel=3)
    if "A1_title" not in visible.columns and "A1_audio_url" not in visible.columns:
        warnings.warn(f"{path}: workers will see bare document ids (e.g. {visible['A1'].iloc[0]!r}): give a "
                      "documents table with title, snippet, url or audio_url", SatcalWarning, stacklevel=3)


def _read_documents(path: Path) -> pd.DataFrame:
    from .fileio import read_csv_strings
    table = read_csv_strings(path, "a documents CSV with doc and any of title, snippet, url, audio_url")
    if "doc" not in table.columns:
        raise InputFileError(path, "missing column doc (the documents table needs doc and any of "
                                   "title, snippet, url, audio_url)", 1)
    dup = table["doc"].duplicated()
    if dup.any():
        raise InputFileError(path, f"document {table['doc'][dup].iloc[0]!r} is listed twice",
                             int(np.flatnonzero(dup)[0]) + 2, "doc")
    return table


def _package_versions() -> dict:
    from .fileio import package_versions
    return package_versions()


#: The name of :class:`Study` before it ran every stage; kept for one release.
Workspace = Study


def served_app():
    """The application of one of several server processes (``satcal serve --workers N``)."""
    return Study.open(os.environ["SATCAL_SERVE_DIR"]).serve_app(
        os.environ.get("SATCAL_SERVE_DB") or None, https_only=os.environ.get("SATCAL_SERVE_HTTPS_ONLY") == "1")
