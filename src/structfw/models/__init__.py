"""Structured models: joint features, task loss, max oracle, decoding."""
from .base import MODEL_REGISTRY, StructuredModel, register_model
from .chain import ChainModel
from .grid import GridModel
from .multiclass import MulticlassModel

__all__ = ["StructuredModel", "register_model", "MODEL_REGISTRY", "ChainModel", "MulticlassModel",
           "GridModel"]
