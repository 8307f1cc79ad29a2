"""Structured models: joint features, task loss, max oracle, decoding."""
from .base import MODEL_REGISTRY, StructuredModel, register_model
from .chain import ChainModel
from .graph import GraphExample, GraphModel
from .graphcut import GraphCutModel, GraphInput
from .grid import GridModel
from .latent import LatentSubclassModel
from .matching import MatchingInput, MatchingModel
from .multiclass import MulticlassModel
from .pose import PoseModel
from .potts import PottsModel

__all__ = ["StructuredModel", "register_model", "MODEL_REGISTRY", "ChainModel", "MulticlassModel",
           "GridModel", "GraphCutModel", "PottsModel", "GraphInput", "GraphModel", "GraphExample",
           "MatchingModel", "MatchingInput", "PoseModel", "LatentSubclassModel"]
