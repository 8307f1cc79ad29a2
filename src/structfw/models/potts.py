"""Multi-label node labelling with a Potts pairwise term (Stanford Background set-up).

The semantic-segmentation set-up of the MP-BCFW paper (App. A, "Stanford"): superpixel
nodes with K labels, class-wise unary features (eq. (7) per node) and a Potts term on
neighbouring superpixels.  Here the Potts weight of an edge is learned from its
non-negative edge features, c_e = ⟨w_p, f_e⟩ (+ a fixed ``potts_constant``, the
paper's constant weight 1 when set to 1), with the joint feature and sign convention of
`GraphCutModel`::

    phi(x, y) = [ sum_v x_v placed in block y_v ,  - sum_{e=(u,v) : y_u != y_v} f_e ]   (d = K F + Fe)

Loss-augmented decoding (eq. (10) of App. A) is NP-hard for K > 2; the oracle is
alpha-expansion (Boykov, Veksler & Zabih 2001; each move an exact min cut,
`structfw.oracles.potts.alpha_expansion`) started from the unary argmax, so
``approximate_oracle = True``.  It never returns a labelling scoring below the ground
truth: when expansion ends below H_i(y_i) = 0 the ground truth is returned (the engine
guards this too).  For K = 2 alpha-expansion is exact (it reaches the min cut).  The oracle is
the potential-level one, `structfw.oracles.potentials.potts_hinge`, on the node scores and
edge costs at w.

``potts_constant`` is a fixed term -C #cut(y) of the score, not part of phi (it is the
phi_o component of Sec. 3 of the MP-BCFW paper): `PottsModel.fixed_score`.  The
engine adds its difference to each corner's constant, L_i(y) = Delta(y_i, y)
- C (#cut(y) - #cut(y_i)), so the gaps it reports are those of the objective the
oracle maximises.
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..oracles.potentials import potts_certificate, potts_search
from ..oracles.potts import alpha_expansion, edge_costs, unary_argmax
from ._validation import check_int_param
from .base import checked, register_model
from .graphcut import _NO_WEIGHTS, GraphInput, GraphLabellingModel


@register_model
class PottsModel(GraphLabellingModel):
    """K-label node labelling with learned Potts edge weights and an alpha-expansion oracle.

    Parameters
    ----------
    n_states : int >= 2
        K, the number of labels.
    n_features : int >= 1
        F, node features (dense or scipy.sparse rows).
    n_edge_features : int >= 1
        Fe, non-negative edge features.
    potts_constant : float >= 0, default 0.0
        Fixed Potts weight added to every edge (see the module docstring).
    max_cycles : int >= 1, default 10
        Maximum number of alpha-expansion cycles over the K labels.
    negative_weights : {"clip", "raise"}, default "clip"
        Negative pairwise weights are clipped at 0 (the engine's projection) or refused.

    Notes
    -----
    Inputs and labellings are as for `GraphCutModel`, with
    y (V,) int64 in 0..K-1.  ``nonnegative_indices`` = the Fe pairwise coordinates.
    """

    approximate_oracle = True

    def __init__(self, n_states: int, n_features: int, n_edge_features: int, potts_constant: float = 0.0,
                 max_cycles: int = 10, negative_weights: str = "clip") -> None:
        self.n_states = check_int_param(n_states, "n_states", 2)
        self._init_sizes(n_features, n_edge_features, negative_weights)
        if (isinstance(potts_constant, bool) or not isinstance(potts_constant, numbers.Real)
                or not np.isfinite(potts_constant) or potts_constant < 0):
            raise ValueError(f"potts_constant must be a finite float >= 0, got {potts_constant!r}")
        self.potts_constant = float(potts_constant)
        self.max_cycles: int = check_int_param(max_cycles, "max_cycles", 1)

    def get_config(self) -> dict[str, Any]:
        return {"n_states": self.n_states, "n_features": self.n_features,
                "n_edge_features": self.n_edge_features, "potts_constant": self.potts_constant,
                "max_cycles": self.max_cycles, "negative_weights": self.negative_weights}

    def _expand(self, U: npt.NDArray[np.float64], tails: npt.NDArray[np.int64], heads: npt.NDArray[np.int64],
                c: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int64], float]:
        y, s = alpha_expansion(U, tails, heads, c, unary_argmax(U), self.max_cycles)
        return y, s

    @checked
    def loss_augmented_decode(self, x: GraphInput | Sequence[Any], y_true: npt.ArrayLike,
                              w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Alpha-expansion on Delta(y_true, y) + ⟨Pi(w), phi(x, y)⟩ - C #cut(y); y_true
        itself when expansion ends below it."""
        w = self._check_w(w)
        nodes, tails, heads, ef = self._parts(x)
        y_true = np.ascontiguousarray(y_true, np.int64)
        U = self._unary(nodes, w, y_true, False)
        a = self._loss_weights(x)
        # the potential-level oracle (structfw.oracles.potentials.potts_hinge): U gets the loss in place,
        # and y_true comes back when expansion ends below it
        y, _, _ = potts_search(U, tails, heads, self._costs(ef, w), y_true, _NO_WEIGHTS if a is None else a, 1.0,
                               self.max_cycles)
        return self._not_below_truth(U, tails, heads, ef, w, y, y_true)

    @checked
    def loss_augmented_decode_with_bound(self, x: GraphInput | Sequence[Any], y_true: npt.ArrayLike,
                                         w: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], float]:
        """(the oracle's labelling, B) with B >= max_y Delta(y_true, y) + ⟨w, phi(x, y)⟩ - C #cut(y).

        B is TRW-S's bound on the Potts energy at w itself (`structfw.oracles.loopy.trws`,
        the dual of the local-polytope relaxation); the engine turns it into a certified
        duality gap (`structfw.solvers.problem.Problem.hinge_bounds`).  The labelling is the
        better of alpha expansion's (`loss_augmented_decode`) and TRW-S's."""
        w = self._check_w(w)
        nodes, tails, heads, ef = self._parts(x)
        y_true = np.ascontiguousarray(y_true, np.int64)
        U = self._unary(nodes, w, y_true, True, self._loss_weights(x))  # the loss added by `node_loss`
        # the certificate at w itself (costs unclipped), as potts_hinge(certify=True) takes it
        c = edge_costs(ef, w, self.edge_offset, self.potts_constant, False)
        return potts_certificate(U, tails, heads, c, self._unchecked_loss_augmented_decode(x, y_true, w))

    # a property, where the base class has a plain attribute: the fixed term is there only when C > 0
    @property
    def has_fixed_score(self) -> bool:  # type: ignore[override]
        return self.potts_constant > 0.0

    @checked
    def fixed_score(self, x: GraphInput | Sequence[Any], y: npt.ArrayLike) -> float:
        """-C #cut(y): the fixed Potts term (0 with the default C = 0)."""
        if self.potts_constant == 0.0:
            return 0.0
        _, tails, heads, _ = self._parts(x)
        y = np.asarray(y)
        return -self.potts_constant * float(np.count_nonzero(y[tails] != y[heads]))

    @checked
    def decode(self, x: GraphInput | Sequence[Any], w: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Alpha-expansion on ⟨Pi(w), phi(x, y)⟩ - C #cut(y) from the unary argmax."""
        w = self._check_w(w)
        nodes, tails, heads, ef = self._parts(x)
        U = self._unary(nodes, w, np.zeros(0, np.int64), False)
        y, _ = self._expand(U, tails, heads, self._costs(ef, w))
        return y
