"""Data sets: bundled (OCR letters, snakes), a tagged text corpus (optional package), generated (segmentation, superpixel graphs, word alignment, pose), on-disk (svmlight)."""
from ._bundled import load_ocr, load_snakes, snakes_one_hot
from .alignment import make_alignment
from .corpus import load_tagged_corpus
from .graphs import load_superpixel_graphs, without_edges
from .heart import load_heart_scale
from .pose import load_pose
from .segmentation import load_segmentation, make_horseseg_like, make_stanford_like
from .svmlight import load_svmlight

__all__ = ["load_ocr", "load_snakes", "snakes_one_hot", "load_svmlight", "load_heart_scale",
           "load_segmentation", "make_horseseg_like", "make_stanford_like", "make_alignment",
           "load_superpixel_graphs", "without_edges", "load_tagged_corpus"]
