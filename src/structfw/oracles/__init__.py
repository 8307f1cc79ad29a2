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

__all__ = [
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
