"""Id parsing shared by the gain and discount registries: a family is an id pattern and the
constructor it calls, so a new family is one entry, never a new branch."""
from __future__ import annotations

import re


def _base_above_one(b: str, what: str, formula: str) -> float:
    """A logarithm's or a power's base from an id: above 1, or the measure is degenerate
    (log base 1 divides by log 1 = 0; a power of 1 gives every level gain 0; below 1 the
    discount grows or the gain falls with relevance)."""
    base = float(b)
    if not base > 1:
        raise ValueError(f"{what}{b}: the base must be greater than 1 in {formula}, got {b}")
    return base


def _lookup(families: dict, name: str, kind: str):
    for pattern, make in families.items():
        m = re.fullmatch(pattern, name)
        if m:
            return make(m)
    known = ", ".join(p.replace("(?P<b>\\d+(?:\\.\\d+)?)", "<b>").replace("(?P<m>\\d+)", "<m>")
                      .replace("(?P<p>0?\\.\\d+)", "<p>").replace("(?P<m>\\d+)?", "[<m>]")
                      for p in families)
    raise ValueError(f"unknown {kind} {name!r}; use one of: {known}")
