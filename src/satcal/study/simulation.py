"""The simulated crowd run on a study: its user model, and its answers as a platform's result
file or through the hosted study."""
from __future__ import annotations

import json

import pandas as pd

from ..errors import SatcalError
from ..fileio import atomic_write_text, sha256_file
from ..settings import stream_seed


class Simulation:
    """simulate of a :class:`~satcal.study.Study` (a part of it)."""

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
        from ..simulate import UserModel
        return UserModel.from_settings(self.settings.simulation, stream_seed(self.seed, stream))

    def lists(self) -> pd.DataFrame:
        """Examples and traps in one table of lists under their ``source_id``."""
        from ..simulate import study_lists
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
        from ..platforms import get_platform
        from ..simulate import simulate_results
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

    def _check_served_at(self, url: str) -> None:
        """One request to ``url`` before the crowd is sent: where nothing answers, one line
        naming the address and the command that starts the hosted study."""
        import httpx
        try:
            httpx.get(url, timeout=10)
        except httpx.HTTPError as exc:
            raise SatcalError(f"{url}: no hosted study answers there ({type(exc).__name__}: {exc}); start "
                              f"it with satcal serve {self.path} and give its address to --serve") from None

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
        from ..simulate import simulate_served
        model = model or self.user_model()
        self._check_served_at(url)
        visits, truth = simulate_served(url, self.table("items.csv"), self.table("key.csv"), self.lists(), self.k,
                                        max(self["study.levels"]), model, sha256_file(self.file("key.csv")),
                                        concurrency=concurrency, progress=progress)
        errors = truth["errors"]
        if errors:
            raise SatcalError(f"{len(errors)} simulated participants failed, first: {errors[0]}")
        with self.locked():
            (self.path / "simulated").mkdir(exist_ok=True)
            atomic_write_text(self.path / "simulated" / "serve-truth.json", json.dumps(truth, indent=1) + "\n")
            self.record("simulate", {"served_at": url, "participants": len(visits), "pages": truth["pages"]})
        return visits, truth
