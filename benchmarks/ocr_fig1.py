"""Thin wrapper: `python benchmarks/ocr_fig1.py --help` (same options as `structfw bench fig1`)."""
from structfw_bench.fig1 import bench_fig1

if __name__ == "__main__":
    bench_fig1()
