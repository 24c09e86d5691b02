"""The :class:`Study`, assembled from its parts: creation and opening here, every other method in
the module of its part."""
from __future__ import annotations

import os
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SatcalError
from ..fileio import OutputSet, atomic_write_text
from ..judgments import read_judgments
from .. import settings as settings_model
from .analyze import Analyses
from .archive import Archive
from .config import _platform_schemas, default_instructions, validate_config
from .design import DesignStages
from .hosting import Hosting
from .manifest import Manifest
from .served import _refuse_while_served, served_answers
from .simulation import Simulation
from .staging import Staging
from .tables import Tables, _read_documents


@dataclass
class Study(Tables, Staging, Manifest, DesignStages, Simulation, Archive, Analyses, Hosting):
    """A study directory. Use :meth:`init` to create one and :meth:`open` to use it.

    Attributes
    ----------
    path : pathlib.Path
        The study directory.
    config : dict
        study.toml as validated (defaults filled in), as read by :meth:`init` or :meth:`open`;
        empty when constructed directly.
    """

    path: Path
    config: dict = field(default_factory=dict, repr=False)  # its repr is the whole study.toml

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
            from ..topics import read_topics
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
        from ..fileio import read_utf8_text
        try:
            config = tomllib.loads(read_utf8_text(toml))
        except tomllib.TOMLDecodeError as exc:
            raise SatcalError(f"{toml}: {exc}") from None
        return cls(path, validate_config(config, toml))


#: The name of :class:`Study` before it ran every stage; kept for one release.
Workspace = Study


def served_app():
    """The application of one of several server processes (``satcal serve --workers N``)."""
    return Study.open(os.environ["SATCAL_SERVE_DIR"]).serve_app(
        os.environ.get("SATCAL_SERVE_DB") or None, https_only=os.environ.get("SATCAL_SERVE_HTTPS_ONLY") == "1")
