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
from .grid import (
    grid_block_icm,
    grid_energy,
    grid_loopy_bp,
    grid_max_product,
    grid_phi_diff,
    grid_unary,
)

__all__ = [
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
]
