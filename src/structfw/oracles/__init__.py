"""Combinatorial kernels the models call (numba-compiled).

Layering: this package imports nothing from ``structfw.models`` or ``structfw.solvers``.
"""
from .chain import (
    chain_oracle_csr,
    chain_oracle_dense,
    chain_phi_diff_csr,
    chain_phi_diff_dense,
    chain_unary_csr,
    chain_unary_dense,
    hamming_loss,
    loss_augmented_viterbi,
    viterbi,
)
from .multiclass import multiclass_oracle, multiclass_phi_diff, multiclass_scores
from .marginals import (
    chain_expectation_csr,
    chain_expectation_dense,
    chain_marginal_sums,
    chain_marginals,
    softmax_expectation,
)
from .grid import (
    grid_block_icm,
    grid_energy,
    grid_loopy_bp,
    grid_max_product,
    grid_phi_diff,
    grid_unary,
)
from .matching import (
    matching_hamming,
    matching_phi_diff_csr,
    matching_phi_diff_dense,
    matching_scores_csr,
    matching_scores_dense,
    matching_value,
    max_weight_partial_matching,
)
from .maxflow import available_backends, bk_maxflow, min_cut, min_cut_directed
from .potts import (
    alpha_expansion,
    binary_graph_cut,
    edge_costs,
    expansion_move,
    graph_phi_diff_csr,
    graph_phi_diff_dense,
    node_scores_csr,
    node_scores_dense,
    potts_score,
)

__all__ = [
    "min_cut",
    "min_cut_directed",
    "bk_maxflow",
    "available_backends",
    "alpha_expansion",
    "expansion_move",
    "binary_graph_cut",
    "edge_costs",
    "potts_score",
    "node_scores_dense",
    "node_scores_csr",
    "graph_phi_diff_dense",
    "graph_phi_diff_csr",
    "grid_unary",
    "grid_energy",
    "grid_block_icm",
    "grid_loopy_bp",
    "grid_max_product",
    "grid_phi_diff",
    "multiclass_oracle",
    "multiclass_phi_diff",
    "multiclass_scores",
    "viterbi",
    "loss_augmented_viterbi",
    "chain_unary_dense",
    "chain_unary_csr",
    "chain_oracle_dense",
    "chain_oracle_csr",
    "chain_phi_diff_dense",
    "chain_phi_diff_csr",
    "hamming_loss",
    "chain_marginals",
    "chain_marginal_sums",
    "chain_expectation_dense",
    "chain_expectation_csr",
    "softmax_expectation",
    "max_weight_partial_matching",
    "matching_value",
    "matching_scores_dense",
    "matching_scores_csr",
    "matching_phi_diff_dense",
    "matching_phi_diff_csr",
    "matching_hamming",
]
