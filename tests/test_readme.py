"""The README's code examples run as written (with fewer passes)."""
import re
from pathlib import Path

import numpy as np
import pytest

import structfw as sf

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _python_blocks(path=README):
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


def test_ten_line_example_runs(tmp_path, monkeypatch):
    block = next(b for b in _python_blocks() if "load_ocr" in b and "StructuredSVM" in b)
    assert len(block.strip().splitlines()) <= 12
    monkeypatch.chdir(tmp_path)
    code = block.replace("max_passes=50", "max_passes=1")
    ns = {}
    exec(compile(code, "README example", "exec"), ns)
    assert (tmp_path / "ocr.npz").exists()
    assert 0.5 < ns["svm"].score(ns["Xt"], ns["Yt"]) <= 1


def test_custom_model_example_learns():
    block = next(b for b in _python_blocks(ROOT / "docs" / "guide" / "models.md") if "class MyModel" in b)
    ns = {}
    exec(compile(block, "README model", "exec"), ns)
    MyModel = ns["MyModel"]
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 90)
    X = rng.normal(size=(90, 4)) + 4 * np.eye(3, 4)[y]
    svm = sf.StructuredSVM(MyModel(3, 4), lam=0.01, max_passes=20, tol=1e-3, random_state=0)
    svm.fit(list(X), list(y))
    assert svm.score(list(X), list(y)) > 0.9


def test_readme_is_a_newcomers_page_with_links_that_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= 160
    assert text.count("```bash\npip install") == 2
    for target in re.findall(r"\]\(((?:docs|examples)/[^)#]+)\)", text):
        assert (ROOT / target).exists(), target


@pytest.mark.slow
def test_quick_start_reaches_its_tol(tmp_path, monkeypatch):
    block = next(b for b in _python_blocks() if "load_ocr" in b and "StructuredSVM" in b)
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec(compile(block, "README example", "exec"), ns)
    assert ns["svm"].stopped_ == "tol"


def test_path_guide_code_blocks_run(tmp_path, monkeypatch):
    """Every python block of docs/guide/path.md runs as written, on the first 60 OCR words."""
    blocks = _python_blocks(ROOT / "docs" / "guide" / "path.md")
    assert blocks
    monkeypatch.chdir(tmp_path)
    ns = {}
    for k, block in enumerate(blocks):
        code = block.replace('sf.datasets.load_ocr("train")', 'tuple(v[:60] for v in sf.datasets.load_ocr("train"))')
        code = code.replace("verbose=1", "verbose=0").replace("progress=True", "progress=False")
        exec(compile(code, f"docs/guide/path.md block {k}", "exec"), ns)
    assert (tmp_path / "path.json").exists()
