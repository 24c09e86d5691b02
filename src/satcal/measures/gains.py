"""Gain functions g: relevance level -> utility, declared once as id families.

``lin``: g(l) = l; ``exp<b>``: g(l) = b^l - 1 (b = 2 is Burges et al.'s exponential gain);
``bin<m>``: g(l) = 1 if l >= m else 0; or a custom ``{level: value}`` map.

References
----------
Järvelin, K. and Kekäläinen, J. (2002). Cumulated gain-based evaluation of IR techniques.
ACM Transactions on Information Systems 20(4), 422-446.

Burges, C., Shaked, T., Renshaw, E., Lazier, A., Deeds, M., Hamilton, N. and Hullender, G.
(2005). Learning to rank using gradient descent. ICML 2005.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ._families import _base_above_one, _lookup

__all__ = ["Gain", "GAIN_FAMILIES", "get_gain"]


@dataclass(frozen=True)
class Gain:
    """A gain function g: level -> utility.

    Parameters
    ----------
    id : str
        Registry id (``lin``, ``exp2``, ``bin1``, ...) or a custom name.
    fn : callable
        Vectorised map from a float array of levels to gains.
    formula : str
        Human-readable formula, shown in reports.
    """

    id: str
    fn: Callable[[np.ndarray], np.ndarray] = field(repr=False, compare=False)
    formula: str = ""

    def __call__(self, levels) -> np.ndarray:
        return np.asarray(self.fn(np.asarray(levels, dtype=float)), dtype=float)

    @classmethod
    def from_mapping(cls, mapping: Mapping[int, float], name: str = "custom") -> "Gain":
        """A custom gain from a ``{level: value}`` map; levels not in the map raise.

        Parameters
        ----------
        mapping : mapping of int to float
            The gain of each level.
        name : str, default ``"custom"``
            The gain's id in tables.

        Returns
        -------
        Gain

        Examples
        --------
        >>> Gain.from_mapping({0: 0.0, 1: 0.4, 2: 1.0})([0, 2, 1]).tolist()
        [0.0, 1.0, 0.4]
        """
        if not mapping:
            raise ValueError("a custom gain needs at least one level -> value pair")
        keys = np.array(sorted(mapping), dtype=float)
        values = np.array([float(mapping[k]) for k in sorted(mapping)], dtype=float)

        def fn(levels: np.ndarray) -> np.ndarray:
            """The gain of each level, from the mapping.

            Parameters
            ----------
            levels : numpy.ndarray
                Relevance levels.

            Raises
            ------
            ValueError
                A level the mapping has no value for.
            """
            pos = np.searchsorted(keys, levels)
            pos_clipped = np.clip(pos, 0, len(keys) - 1)
            found = keys[pos_clipped] == levels
            if not np.all(found):
                missing = sorted(set(np.asarray(levels)[~found].tolist()))
                raise ValueError(f"custom gain {name!r} has no value for level(s) {missing}; "
                                 f"it maps levels {keys.astype(int).tolist()}")
            return values[pos_clipped]

        text = ", ".join(f"{int(k)}->{v:g}" for k, v in zip(keys, values))
        return cls(name, fn, f"map {{{text}}}")


def _lin_gain(_m: re.Match) -> Gain:
    return Gain("lin", lambda l: l, "g(l) = l")


def _exp_gain(m: re.Match) -> Gain:
    base = _base_above_one(m.group("b"), "gain exp", "g(l) = b^l - 1")
    return Gain(f"exp{m.group('b')}", lambda l: base ** l - 1.0, f"g(l) = {m.group('b')}^l - 1")


def _bin_gain(m: re.Match) -> Gain:
    lmin = int(m.group("m"))
    return Gain(f"bin{lmin}", lambda l: (l >= lmin).astype(float), f"g(l) = 1 if l >= {lmin} else 0")


#: Gain families: id pattern -> constructor (declared once; parsed by :func:`get_gain`).
GAIN_FAMILIES: dict[str, Callable[[re.Match], Gain]] = {
    r"lin": _lin_gain,
    r"exp(?P<b>\d+(?:\.\d+)?)": _exp_gain,
    r"bin(?P<m>\d+)": _bin_gain,
}


def get_gain(gain: "str | Gain | Mapping[int, float]") -> Gain:
    """Resolve a gain id, a :class:`Gain` or a level map into a :class:`Gain`.

    Parameters
    ----------
    gain : str, Gain or mapping of int to float
        ``lin`` (g(l) = l), ``exp<b>`` (g(l) = b^l - 1, b > 1), ``bin<m>`` (1 if l >= m else 0),
        a :class:`Gain` (returned as is) or a ``{level: value}`` map.

    Returns
    -------
    Gain

    Raises
    ------
    ValueError
        For an unknown id, naming the families known.

    Examples
    --------
    >>> get_gain("exp2")([0, 1, 2]).tolist()
    [0.0, 1.0, 3.0]
    >>> get_gain("bin2")([0, 1, 2]).tolist()
    [0.0, 0.0, 1.0]
    """
    if isinstance(gain, Gain):
        return gain
    if isinstance(gain, Mapping):
        return Gain.from_mapping(gain)
    return _lookup(GAIN_FAMILIES, str(gain), "gain")
