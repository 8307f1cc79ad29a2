"""Data sets: bundled (OCR letters, snakes), a tagged text corpus (optional package), generated (segmentation, superpixel graphs, word alignment, pose, a CoNLL-2000-sized chunking corpus), on-disk (svmlight, CoNLL-2000 column files, Fashion-MNIST IDX files, graphs as JSON lines)."""
from ._bundled import load_ocr, load_snakes, snakes_one_hot
from .alignment import make_alignment
from .conll import conll_chain_data, load_conll, load_conll_scale, make_conll_like
from .corpus import load_tagged_corpus
from .fashion import load_fashion_mnist, read_idx
from .graph_files import load_graph_file
from .graphs import load_superpixel_graphs, without_edges
from .heart import load_heart_scale
from .pose import load_pose
from .segmentation import load_segmentation, make_horseseg_like, make_stanford_like
from .segmentation_paper import load_horseseg, load_stanford_background, make_horseseg_paper, make_stanford_paper
from .svmlight import load_svmlight, load_svmlight_pair

__all__ = ["load_ocr", "load_snakes", "snakes_one_hot", "load_svmlight", "load_heart_scale",
           "load_segmentation", "make_horseseg_like", "make_stanford_like", "make_alignment",
           "load_superpixel_graphs", "without_edges", "load_graph_file", "load_tagged_corpus", "load_conll", "conll_chain_data",
           "make_conll_like", "load_conll_scale", "load_fashion_mnist", "read_idx", "load_svmlight_pair",
           "make_horseseg_paper", "make_stanford_paper", "load_stanford_background", "load_horseseg"]
