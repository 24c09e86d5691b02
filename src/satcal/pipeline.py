"""End-to-end runs that chain the stages: the demo."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .analysis import calibrate
from .datasets import load_ecir2015

__all__ = ["run_demo"]


def run_demo(out: Path, seed: int = 2015, progress: bool = True,
             echo: Callable[[str], None] = print) -> dict:
    """The demo: the published ECIR 2015 answers analysed into ``out/ecir2015``.

    Returns a summary with the analysis result and a map of output labels to paths.
    """
    out = Path(out)
    study = load_ecir2015()
    echo(study.notice)
    echo(f"Analysing the published answers: {len(study.examples)} examples, k = {study.k}, "
         f"{study.n_levels} levels, 36 formulations ...")
    result = calibrate(study, seed=seed, progress=progress)
    written = result.save(out / "ecir2015")
    outputs = {"ECIR 2015 report": written["report"],
               "ECIR 2015 bias table": written["bias"],
               "ECIR 2015 ANOVA": written["anova"],
               "ECIR 2015 figures": str(Path(written["fig1_sat.png"]).parent)}
    return {"result": result, "outputs": outputs}
