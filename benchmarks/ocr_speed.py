"""Thin wrapper: `python benchmarks/ocr_speed.py --help` (same options as `structfw bench speed`)."""
from structfw_bench.speed import bench_speed

if __name__ == "__main__":
    bench_speed()
