"""Kernel binary SVM on the L2-SVM simplex dual, trained by Frank-Wolfe methods
(FW, MFW, SWAP, PARTAN; Frandi, Nanculef & Suykens 2015).

This layer is independent of the structural-SVM part of structfw.
"""
from ._solver import SimplexFWSolver, solve_simplex_qp
from .classifier import FrankWolfeSVC, load

__all__ = ["FrankWolfeSVC", "SimplexFWSolver", "load", "solve_simplex_qp"]
