"""Reproduce Tables 2-4 of Frandi, Nanculef & Suykens (2015) for structfw.svm.

Same as ``structfw bench svm``:  python benchmarks/svm_tables.py [--quick] [--out DIR]
[--large/--no-large] [--seed N] [--heart-path FILE] [--C C]
"""
from structfw_bench.svm import bench_svm

if __name__ == "__main__":
    bench_svm()
