"""Discount functions d: rank -> factor for a cutoff k, declared once as id families.

``zipf``: d(i) = 1/i; ``lin``: d(i) = (k+1-i)/k; ``log<b>``: d(i) = 1/log_b(b+i-1);
``jarvelin<b>``: d(i) = 1/max(1, log_b i); ``const``: d(i) = 1; ``geo<p>``: d(i) = p^(i-1)
(rank-biased precision's user model); or a custom vector of k factors.

References
----------
Järvelin, K. and Kekäläinen, J. (2000). IR evaluation methods for retrieving highly relevant
documents. SIGIR 2000.

Burges, C. et al. (2005). Learning to rank using gradient descent. ICML 2005.

Moffat, A. and Zobel, J. (2008). Rank-biased precision for measurement of retrieval
effectiveness. ACM Transactions on Information Systems 27(1), 2:1-2:27.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ._families import _base_above_one, _lookup

__all__ = ["Discount", "DISCOUNT_FAMILIES", "get_discount"]


@dataclass(frozen=True)
class Discount:
    """A discount function d: rank -> factor, evaluated for a cutoff k.

    Parameters
    ----------
    id : str
        Registry id (``zipf``, ``log2``, ``jarvelin2``, ...) or a custom name.
    fn : callable
        ``fn(ranks, k)`` with ``ranks = 1..k`` (float array) returning the k factors.
    formula : str
        Human-readable formula.
    """

    id: str
    fn: Callable[[np.ndarray, int], np.ndarray] = field(repr=False, compare=False)
    formula: str = ""

    def factors(self, k: int) -> np.ndarray:
        """The k discount factors d(1), ..., d(k).

        Parameters
        ----------
        k : int
            The cutoff: the number of ranks.

        Returns
        -------
        numpy.ndarray of float, shape (k,)

        Examples
        --------
        >>> get_discount("zipf").factors(3).round(4).tolist()
        [1.0, 0.5, 0.3333]
        """
        ranks = np.arange(1, k + 1, dtype=float)
        out = np.asarray(self.fn(ranks, k), dtype=float)
        if out.shape != (k,):
            raise ValueError(f"discount {self.id!r} gives {out.shape[0] if out.ndim else 1} "
                             f"factors for k = {k}; it needs exactly k")
        return out

    @classmethod
    def from_factors(cls, factors: Sequence[float], name: str = "custom") -> "Discount":
        """A custom discount given its k factors d(1..k).

        Parameters
        ----------
        factors : sequence of float
            d(1), ..., d(k); lists of another length are refused when scored.
        name : str, default ``"custom"``
            The discount's id in tables.

        Returns
        -------
        Discount
        """
        values = np.asarray(factors, dtype=float)
        if values.ndim != 1 or values.size == 0:
            raise ValueError("a custom discount needs a non-empty vector of k factors")

        def fn(ranks: np.ndarray, k: int) -> np.ndarray:
            """The factors, one per rank (``ranks`` is not used).

            Parameters
            ----------
            ranks : numpy.ndarray
                The ranks 1..k.
            k : int
                List length, which must equal the number of factors.

            Raises
            ------
            ValueError
                ``k`` differs from the number of factors.
            """
            if k != values.size:
                raise ValueError(f"custom discount {name!r} has {values.size} factors, "
                                 f"but lists have k = {k} documents")
            return values

        return cls(name, fn, "d = (" + ", ".join(f"{v:.4g}" for v in values) + ")")


def _zipf(_m):
    return Discount("zipf", lambda i, k: 1.0 / i, "d(i) = 1/i")


def _lin_discount(_m):
    return Discount("lin", lambda i, k: (k + 1.0 - i) / k, "d(i) = (k+1-i)/k")


def _log_discount(m):
    b = _base_above_one(m.group("b"), "discount log", "d(i) = 1/log_b(b + i - 1)")
    # 1/log_b(b + i - 1): log2 gives the de facto 1/log2(i+1) (Burges et al., 2005).
    return Discount(f"log{m.group('b')}", lambda i, k: np.log(b) / np.log(b + i - 1.0),
                    f"d(i) = 1/log_{m.group('b')}({m.group('b')} + i - 1)")


def _jarvelin(m):
    b = _base_above_one(m.group("b"), "discount jarvelin", "d(i) = 1/max(1, log_b i)")
    # The original DCG (Jarvelin & Kekalainen 2000): no discount before rank b.
    return Discount(f"jarvelin{m.group('b')}",
                    lambda i, k: 1.0 / np.maximum(1.0, np.log(i) / np.log(b)),
                    f"d(i) = 1/max(1, log_{m.group('b')} i)")


def _const(_m):
    return Discount("const", lambda i, k: np.ones_like(i), "d(i) = 1")


def _geo(m):
    p = float(m.group("p"))
    if not 0 < p < 1:
        raise ValueError(f"discount geo{m.group('p')}: the persistence p must be in (0, 1)")
    # Rank-biased precision's user model (Moffat & Zobel, TOIS 2008): the user goes on to the
    # next document with probability p. With the 'max' normalisation and g = l/(L-1) this is
    # graded RBP@k / (1 - p^k).
    return Discount(f"geo{m.group('p')}", lambda i, k: p ** (i - 1.0), f"d(i) = {m.group('p')}^(i-1)")


DISCOUNT_FAMILIES: dict[str, Callable[[re.Match], Discount]] = {
    r"zipf": _zipf,
    r"lin": _lin_discount,
    r"log(?P<b>\d+(?:\.\d+)?)": _log_discount,
    r"jarvelin(?P<b>\d+(?:\.\d+)?)": _jarvelin,
    r"const": _const,
    r"geo(?P<p>0?\.\d+)": _geo,
}


def get_discount(discount: "str | Discount | Sequence[float]") -> Discount:
    """Resolve a discount id, a :class:`Discount` or a vector of k factors.

    Parameters
    ----------
    discount : str, Discount or sequence of float
        ``zipf`` (1/i), ``lin`` ((k+1-i)/k), ``log<b>`` (1/log_b(b+i-1); ``log2`` is the usual
        1/log2(i+1) of Burges et al. 2005), ``jarvelin<b>`` (1/max(1, log_b i), Järvelin and
        Kekäläinen 2000), ``const`` (1), ``geo<p>`` (p^(i-1), Moffat and Zobel 2008), a
        :class:`Discount` (returned as is) or the k factors of a custom discount.

    Returns
    -------
    Discount

    Raises
    ------
    ValueError
        For an unknown id or a base or persistence out of range.

    Examples
    --------
    >>> get_discount("log2").factors(3).round(4).tolist()
    [1.0, 0.6309, 0.5]
    >>> get_discount("geo0.5").factors(3).tolist()
    [1.0, 0.5, 0.25]
    """
    if isinstance(discount, Discount):
        return discount
    if isinstance(discount, str):
        return _lookup(DISCOUNT_FAMILIES, discount, "discount")
    return Discount.from_factors(discount)
