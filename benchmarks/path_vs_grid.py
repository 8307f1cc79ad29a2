"""Figure 4 of Osokin et al. (2016): eps-approximate regularisation path vs grid search
(lam = 2^15..2^-15) with and without warm start, on OCR.

Same as ``structfw bench path``; e.g.

    python benchmarks/path_vs_grid.py --eps 0.1 --out bench_out/path
"""
from structfw_bench.path import bench_path

if __name__ == "__main__":
    bench_path()
