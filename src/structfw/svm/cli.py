"""``structfw bench svm`` is defined with the other benchmarks (:mod:`structfw.bench.svm`)."""
from ..bench.svm import bench_svm

__all__ = ["bench_svm"]
