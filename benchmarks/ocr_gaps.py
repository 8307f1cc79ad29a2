"""Thin wrapper: `python benchmarks/ocr_gaps.py --help` (same options as `structfw bench gaps`)."""
from structfw_bench.gaps import bench_gaps

if __name__ == "__main__":
    bench_gaps()
