"""A synthetic stand-in for the LSP pose set (Johnson & Everingham 2010), for `PoseModel`.

Osokin et al. (2016, Sec. 5, App. I) train a tree-structured part model on the Leeds
Sports Pose set; LSP's photographs cannot be shipped, so `load_pose` renders articulated
stick figures with LSP's 14-joint skeleton on natural backgrounds and computes the
features a user would compute on a photograph:

* Skeleton (LSP's joint order): 0 right ankle, 1 right knee, 2 right hip, 3 left hip,
  4 left knee, 5 left ankle, 6 right wrist, 7 right elbow, 8 right shoulder, 9 left
  shoulder, 10 left elbow, 11 left wrist, 12 neck, 13 head top.  The tree (`PARENT`) is
  rooted at the neck: head and shoulders hang from the neck, hips from the shoulder of
  their side, then knee, ankle and elbow, wrist down the limbs.
* Poses: a random body height (130-200 px on a 244 px image, shrunk to fit), torso tilt (+-25 degrees),
  arm and leg angles drawn wide (arms anywhere in front of the body, elbows bent up to
  150 degrees, legs spread and knees bent), a random position with the whole figure in
  the image.  Limbs are drawn as thick sticks (shirt colour on torso and upper arms, skin
  on forearms and head, trouser colour on legs; each jittered per limb and blended with a
  texture crop of a photograph).
* Backgrounds: random crops (with flips) of scikit-image's bundled photographs
  (``astronaut, brick, camera, chelsea, coffee, grass, gravel, rocket, immunohistochemistry,
  hubble_deep_field``); no download.
* Clutter: 2-6 distractor limbs (sticks of the figure's own colours and widths) at
  random places; occlusion: with probability 0.35 a background patch pasted over the
  figure; appearance noise: a random gain and Gaussian pixel noise.
* Features (no ground truth in them): on the 244 x 244 image, HOG (Dalal & Triggs 2005)
  with 4 x 4 pixel cells, 6 unsigned orientation bins (linear interpolation between
  bins), 2 x 2 cell blocks, L2-Hys normalisation: one 24-D block descriptor per grid
  position, 60 x 60 positions (block (i, j) is centred on pixel (4 (i + 1), 4 (j + 1))).
  Plus the block's mean colour (3) and a bias: F = 28, stored as float32 (60 x 60 x 28,
  about 400 KB per image).  The HOG is computed here with numpy (the same descriptor as
  ``skimage.feature.hog(..., feature_vector=False)`` up to its interpolation details)
  because the scikit-image one takes about 0.1 s per image on this size, which would
  dominate the generation of 2,000 images.
* Labels: each joint's grid position (row, col), (14, 2) int64.

Every image is drawn from its own seed (split, index), so ``n`` images are the first n
of the split and the set is identical on every machine and run.  `load_pose` caches
a generated split under ``$STRUCTFW_DATA_HOME`` (or ``~/.cache/structfw``) in
``pose/``, and reuses a larger cached split for a smaller ``n``.

What differs from LSP: synthetic stick figures, not photographs of athletes (no real
limb appearance, clothing or self-occlusion); a 60 x 60 grid of 4-pixel cells instead of
LSP's image-dependent candidate positions; plain HOG instead of the CNN part detectors of
Chen & Yuille (2014); one mixture-free tree instead of their image-dependent pairwise
relations.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ._cache import CacheFile, data_home, read_cache, write_cache
from .segmentation import _as_rgb, _skimage

_VERSION = 1

JOINTS = ("r_ankle", "r_knee", "r_hip", "l_hip", "l_knee", "l_ankle", "r_wrist", "r_elbow", "r_shoulder",
          "l_shoulder", "l_elbow", "l_wrist", "neck", "head")
#: the part tree, rooted at the neck (12)
PARENT = np.array([1, 2, 8, 9, 3, 4, 7, 8, 12, 12, 9, 10, -1, 12], np.int64)
#: the sticks of the PCP measure: every edge of the tree (child, parent)
STICKS = tuple((p, int(PARENT[p])) for p in range(14) if PARENT[p] >= 0)

CELL = 4
GRID = 60
IMAGE = CELL * (GRID + 1)
N_ORIENT = 6
N_FEATURES = 4 * N_ORIENT + 3 + 1
#: full split sizes
SPLITS = {"train": 1000, "test": 1000}
_SEEDS = {"train": 11, "test": 22}
_BACKGROUNDS = ("astronaut", "brick", "camera", "chelsea", "coffee", "grass", "gravel", "rocket",
                "immunohistochemistry", "hubble_deep_field")
_TEXTURES = ("chelsea", "coffee", "brick", "gravel", "astronaut")


class PoseData(NamedTuple):
    """``(X, Y, make_model)``: feature maps (60, 60, 28) float32, joint grid positions
    (14, 2) int64, and ``make_model(**kwargs)`` building the matching `PoseModel`."""

    X: list[npt.NDArray[np.float32]]
    Y: list[npt.NDArray[np.int64]]
    make_model: Callable[..., Any]


# ------------------------------------------------------------------ images
_SOURCE_CACHE: dict[str, list[npt.NDArray[np.float64]]] = {}


def _sources(names: tuple[str, ...], side: int) -> list[npt.NDArray[np.float64]]:
    """The photographs as RGB floats with their short side resized to ``side`` (once)."""
    key = f"{','.join(names)}@{side}"
    if key not in _SOURCE_CACHE:
        from skimage.transform import rescale

        data = _skimage().data
        out = []
        for n in names:
            img = _as_rgb(getattr(data, n)())
            out.append(rescale(img, side / min(img.shape[:2]), channel_axis=2, anti_aliasing=True, order=1))
        _SOURCE_CACHE[key] = out
    return _SOURCE_CACHE[key]


def _crop(rng: np.random.Generator, img: np.ndarray, h: int, w: int) -> np.ndarray:
    i = int(rng.integers(0, img.shape[0] - h + 1))
    j = int(rng.integers(0, img.shape[1] - w + 1))
    c = img[i:i + h, j:j + w]
    if rng.random() < 0.5:
        c = c[:, ::-1]
    return c


def _unit(angle: float) -> npt.NDArray[np.float64]:
    """Direction (drow, dcol) at ``angle`` radians, 0 pointing down the image."""
    return np.array([np.cos(angle), np.sin(angle)])


def _sample_pose(rng: np.random.Generator) -> tuple[npt.NDArray[np.float64], float]:
    """(14, 2) joint pixel positions (row, col) and the body height in pixels."""
    h = rng.uniform(130, 200)
    tilt = np.deg2rad(rng.uniform(-25, 25))
    torso, head, shoulder_w, hip_w = 0.30 * h, 0.13 * h, 0.11 * h, 0.07 * h
    upper_arm, fore_arm, thigh, shin = 0.17 * h, 0.15 * h, 0.24 * h, 0.23 * h
    down, side = _unit(tilt), _unit(tilt - np.pi / 2)  # side points to the figure's left (image right)
    J = np.zeros((14, 2))
    J[12] = 0.0
    J[13] = J[12] - down * head * rng.uniform(0.9, 1.1) + side * rng.uniform(-0.15, 0.15) * head
    J[8] = J[12] - side * shoulder_w
    J[9] = J[12] + side * shoulder_w
    J[2] = J[12] + down * torso - side * hip_w
    J[3] = J[12] + down * torso + side * hip_w
    for s, (sh, el, wr) in ((-1, (8, 7, 6)), (1, (9, 10, 11))):
        # arm angle from "hanging down", outwards positive; the elbow bends either way
        a = tilt + s * np.deg2rad(rng.uniform(-40, 170))
        J[el] = J[sh] + _unit(a) * upper_arm
        b = a + np.deg2rad(rng.uniform(-150, 150))
        J[wr] = J[el] + _unit(b) * fore_arm
    for s, (hp, kn, an) in ((-1, (2, 1, 0)), (1, (3, 4, 5))):
        a = tilt + s * np.deg2rad(rng.uniform(-15, 60))
        J[kn] = J[hp] + _unit(a) * thigh
        b = a + np.deg2rad(rng.uniform(-100, 100)) * rng.uniform(0.2, 1.0)
        J[an] = J[kn] + _unit(b) * shin
    # place the figure: its bounding box, inside the image with a margin of one block
    lo, hi = J.min(0), J.max(0)
    margin = CELL + 2
    span = hi - lo
    room = IMAGE - 2 * margin - span
    if np.any(room < 0):  # too large for the image: shrink about the neck
        J *= float(np.min((IMAGE - 2 * margin) / np.maximum(span, 1e-9))) * 0.98
        h *= float(np.min((IMAGE - 2 * margin) / np.maximum(span, 1e-9))) * 0.98
        lo, hi = J.min(0), J.max(0)
        room = IMAGE - 2 * margin - (hi - lo)
    J += margin - lo + rng.uniform(0, 1, 2) * np.maximum(room, 0)
    return J, h


def _stick_mask(shape: tuple[int, int], a: np.ndarray, b: np.ndarray, width: float) -> npt.NDArray[np.bool_]:
    from skimage.draw import polygon

    d = b - a
    n = np.array([-d[1], d[0]]) / max(np.hypot(*d), 1e-9) * width / 2
    corners = np.array([a + n, b + n, b - n, a - n])
    rr, cc = polygon(corners[:, 0], corners[:, 1], shape)
    m = np.zeros(shape, bool)
    m[rr, cc] = True
    return m


def _disk_mask(shape: tuple[int, int], centre: np.ndarray, radius: float) -> npt.NDArray[np.bool_]:
    from skimage.draw import disk

    rr, cc = disk((centre[0], centre[1]), radius, shape=shape)
    m = np.zeros(shape, bool)
    m[rr, cc] = True
    return m


def _paint(rng: np.random.Generator, img: np.ndarray, mask: np.ndarray, colour: np.ndarray,
           textures: list[np.ndarray]) -> None:
    """Fill ``mask`` with a jittered colour blended with a texture crop (appearance noise)."""
    if not mask.any():
        return
    tex = _crop(rng, textures[int(rng.integers(len(textures)))], IMAGE, IMAGE)
    alpha = rng.uniform(0.15, 0.45)
    c = np.clip(colour + rng.normal(0, 0.05, 3), 0, 1)
    img[mask] = (1 - alpha) * c + alpha * tex[mask]


def render(rng: np.random.Generator) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """One (IMAGE, IMAGE, 3) image in [0, 1] and its (14, 2) joint pixel positions."""
    shape = (IMAGE, IMAGE)
    backgrounds = _sources(_BACKGROUNDS, 300)
    textures = _sources(_TEXTURES, IMAGE)
    img = _crop(rng, backgrounds[int(rng.integers(len(backgrounds)))], IMAGE, IMAGE).copy()
    J, h = _sample_pose(rng)
    shirt, trousers = rng.uniform(0, 1, 3), rng.uniform(0, 1, 3)
    skin = np.array([0.85, 0.65, 0.5]) * rng.uniform(0.5, 1.1) + rng.normal(0, 0.04, 3)
    limb_w = max(0.055 * h, 3.0)
    # distractor limbs first (behind the figure): sticks of the figure's colours and widths
    for _ in range(int(rng.integers(2, 7))):
        a = rng.uniform(0, IMAGE, 2)
        b = a + _unit(rng.uniform(0, 2 * np.pi)) * rng.uniform(0.15, 0.25) * h
        colour = (shirt, trousers, skin)[int(rng.integers(3))]
        _paint(rng, img, _stick_mask(shape, a, b, limb_w * rng.uniform(0.8, 1.3)), colour, textures)
    # the figure: legs, torso, arms, head (later ones in front)
    mid_hip, mid_sh = (J[2] + J[3]) / 2, (J[8] + J[9]) / 2
    torso = _stick_mask(shape, mid_sh, mid_hip, 2.3 * limb_w) | _stick_mask(shape, J[8], J[9], limb_w)
    for (c, p) in ((0, 1), (1, 2), (5, 4), (4, 3)):
        _paint(rng, img, _stick_mask(shape, J[c], J[p], limb_w * 1.15), trousers, textures)
    _paint(rng, img, torso | _stick_mask(shape, J[2], J[3], limb_w), shirt, textures)
    for (c, p, colour) in ((7, 8, shirt), (6, 7, skin), (10, 9, shirt), (11, 10, skin)):
        _paint(rng, img, _stick_mask(shape, J[c], J[p], limb_w), colour, textures)
    _paint(rng, img, _stick_mask(shape, J[12], J[13], 0.5 * limb_w) | _disk_mask(shape, (J[12] + 2 * J[13]) / 3,
                                                                                    1.1 * limb_w), skin, textures)
    if rng.random() < 0.35:  # occlusion: a background patch over part of the figure
        side = int(rng.uniform(0.15, 0.3) * h)
        centre = J[int(rng.integers(14))] + rng.normal(0, 0.05 * h, 2)
        i0 = int(np.clip(centre[0] - side / 2, 0, IMAGE - side))
        j0 = int(np.clip(centre[1] - side / 2, 0, IMAGE - side))
        patch = _crop(rng, backgrounds[int(rng.integers(len(backgrounds)))], side, side)
        img[i0:i0 + side, j0:j0 + side] = patch
    img = img * rng.uniform(0.7, 1.2) + rng.normal(0, rng.uniform(0.02, 0.08), img.shape)
    return np.clip(img, 0, 1), J


# ------------------------------------------------------------------ features
def hog_blocks(img: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """(60, 60, 24) HOG block descriptors of an (244, 244[, 3]) image (module docstring).

    Gradients by central differences on the channel of largest magnitude (Dalal & Triggs
    2005), unsigned orientations in 6 bins with linear interpolation, magnitude-weighted
    histograms on 4 x 4 pixel cells, blocks of 2 x 2 cells L2-Hys normalised (clip 0.2)."""
    img = np.asarray(img, dtype=np.float64)
    if img.ndim == 2:
        img = img[:, :, None]
    gy = np.zeros_like(img)
    gx = np.zeros_like(img)
    gy[1:-1] = img[2:] - img[:-2]
    gx[:, 1:-1] = img[:, 2:] - img[:, :-2]
    mag = np.hypot(gy, gx)
    ch = mag.argmax(axis=2)[:, :, None]
    mag = np.take_along_axis(mag, ch, 2)[:, :, 0]
    ang = np.arctan2(np.take_along_axis(gy, ch, 2)[:, :, 0], np.take_along_axis(gx, ch, 2)[:, :, 0]) % np.pi
    pos = ang / (np.pi / N_ORIENT) - 0.5  # bin centres at (k + 1/2) pi / N_ORIENT
    lo = np.floor(pos).astype(np.int64)
    frac = pos - lo
    n_cells = img.shape[0] // CELL
    side = n_cells * CELL
    ii, jj = np.mgrid[0:side, 0:side]
    cell = ((ii // CELL) * n_cells + jj // CELL).ravel()
    hist = np.zeros(n_cells * n_cells * N_ORIENT)
    m, f, b = mag[:side, :side].ravel(), frac[:side, :side].ravel(), lo[:side, :side].ravel()
    hist += np.bincount(cell * N_ORIENT + b % N_ORIENT, m * (1 - f), hist.size)
    hist += np.bincount(cell * N_ORIENT + (b + 1) % N_ORIENT, m * f, hist.size)
    hist = hist.reshape(n_cells, n_cells, N_ORIENT)
    blocks = np.concatenate([hist[:-1, :-1], hist[:-1, 1:], hist[1:, :-1], hist[1:, 1:]], axis=2)
    eps = 1e-3
    blocks = blocks / np.sqrt((blocks ** 2).sum(2, keepdims=True) + eps ** 2)
    blocks = np.minimum(blocks, 0.2)
    return blocks / np.sqrt((blocks ** 2).sum(2, keepdims=True) + eps ** 2)


def features(img: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """(60, 60, 28) float32: HOG block (24), the block's mean colour (3), a bias (1)."""
    img = np.asarray(img, dtype=np.float64)
    hb = hog_blocks(img)
    n = img.shape[0] // CELL
    cells = img[: n * CELL, : n * CELL].reshape(n, CELL, n, CELL, 3).mean(axis=(1, 3))
    colour = (cells[:-1, :-1] + cells[:-1, 1:] + cells[1:, :-1] + cells[1:, 1:]) / 4
    return np.concatenate([hb, colour, np.ones(hb.shape[:2] + (1,))], axis=2).astype(np.float32)


def to_grid(J: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Joint pixel positions to grid positions: the block whose centre is nearest."""
    g = np.rint(np.asarray(J, dtype=np.float64) / CELL).astype(np.int64) - 1
    return np.clip(g, 0, GRID - 1)


def to_pixels(y: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Grid positions (row, col) back to pixel coordinates: the centre of their block."""
    return (np.asarray(y, dtype=np.float64) + 1.0) * CELL


def pose_image(split: str, index: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The rendered image of example ``index`` of a split, and its joints' grid positions.

    Parameters
    ----------
    split : {"train", "test"}
    index : int in 0..999
        The example (the one `load_pose(split)` holds at this index).

    Returns
    -------
    image : (244, 244, 3) float64 in [0, 1]
    y : (14, 2) int64
        The label `load_pose` holds for it (grid positions; `to_pixels` maps them to pixels).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < SPLITS[split]:
        raise ValueError(f"index must be in 0..{SPLITS[split] - 1}, got {index!r}")
    img, J = render(np.random.default_rng([_SEEDS[split], int(index)]))
    return img, to_grid(J)


def make_pose(n: int, split: str = "train") -> tuple[list[npt.NDArray[np.float32]], list[npt.NDArray[np.int64]]]:
    """Generate the first ``n`` images of a split (no cache): (X, Y)."""
    seed = _SEEDS[split]
    X, Y = [], []
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        img, J = render(rng)
        X.append(features(img))
        Y.append(to_grid(J))
    return X, Y


# ------------------------------------------------------------------ loading and caching
def _path(split: str, n: int) -> Path:
    return data_home() / "pose" / f"pose-{split}-n{n}-v{_VERSION}.npz"


def _cached(split: str, n: int) -> Path | None:
    """A cached file of this split holding at least n images (the smallest such)."""
    folder = data_home() / "pose"
    if not folder.is_dir():
        return None
    best = None
    prefix, suffix = f"pose-{split}-n", f"-v{_VERSION}.npz"
    for p in folder.iterdir():
        name = p.name
        if name.startswith(prefix) and name.endswith(suffix):
            try:
                m = int(name[len(prefix):-len(suffix)])
            except ValueError:
                continue
            if m >= n and (best is None or m < best[0]):
                best = (m, p)
    return None if best is None else best[1]


def _save(path: Path, X: list[np.ndarray], Y: list[np.ndarray]) -> None:
    write_cache(path, dict(X=np.stack(X), Y=np.stack(Y)))


def _decoder(n: int) -> Callable[[CacheFile], tuple[list[np.ndarray], list[np.ndarray]]]:
    """Reads the first ``n`` images of a cached split (which may hold more)."""

    def decode(d: CacheFile) -> tuple[list[np.ndarray], list[np.ndarray]]:
        Xa = d.array("X", "float", shape=(None, GRID, GRID, N_FEATURES))
        Ya = d.array("Y", "int", shape=(Xa.shape[0], PARENT.shape[0], 2))
        d.check(Xa.shape[0] >= n, "X", f"holds {Xa.shape[0]} images, fewer than the {n} its name promises")
        return list(Xa[:n]), [np.ascontiguousarray(y, dtype=np.int64) for y in Ya[:n]]

    return decode


def load_pose(split: str = "train", n: int | None = None, cache: bool = True) -> PoseData:
    """The synthetic pose set (module docstring), generated once and cached.

    Parameters
    ----------
    split : {"train", "test"}
        1,000 images each, drawn from different seeds.
    n : int, optional
        The first n images of the split (1..1000); all by default.
    cache : bool
        Read/write ``<data_home()>/pose/pose-<split>-n<n>-v<version>.npz``; a cached
        larger split serves a smaller n.  A cache file that cannot be read back is
        removed and the images are generated again (a warning names the file).

    Returns
    -------
    PoseData
        ``(X, Y, make_model)``; ``make_model(**kwargs)`` builds the `PoseModel` for these
        features (`make_pose_model`: kwargs override ``tolerance=2.0``,
        ``displacement_scale=30``, ``window=3``, ``window_stride=3``).

    Notes
    -----
    Generation costs about 15 ms per image on one core (measured in docs/results/pose.md);
    the full 1,000-image split is about 400 MB of float32 features in memory.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    total = SPLITS[split]
    if n is None:
        n = total
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= total:
        raise ValueError(f"n must be in 1..{total}, got {n!r}")
    n = int(n)
    loaded = read_cache(_cached(split, n), _decoder(n)) if cache else None
    if loaded is not None:
        X, Y = loaded
    else:
        X, Y = make_pose(n, split)
        if cache:
            _save(_path(split, n), X, Y)
    return PoseData(X, Y, make_pose_model)


def make_pose_model(**kwargs: Any) -> Any:
    """The `PoseModel` of `load_pose`'s data (14 parts, LSP tree, 60 x 60 grid, F = 28).

    Defaults (``kwargs`` override them): ``tolerance=2.0`` cells; ``displacement_scale=30``
    (offsets in half-grids, so dx^2 ranges over [0, 4] like the unit-scale cell features; in
    units of 10 cells the deformation features dwarfed them and BCFW's gap on 60 images rose
    over 15 passes); part filters of ``window=3`` x 3 HOG blocks ``window_stride=3`` cells
    apart (a 9 x 9-cell, 36-pixel window per joint: reading the single block at the joint,
    the model did not even fit its training set, train PCK 0.01; docs/results/pose.md).
    """
    from ..models.pose import PoseModel

    kw: dict[str, Any] = dict(tolerance=2.0, displacement_scale=GRID / 2, window=3, window_stride=3)
    kw.update(kwargs)
    return PoseModel(14, PARENT, N_FEATURES, (GRID, GRID), **kw)


def pcp(Y_true: list[npt.ArrayLike], Y_pred: list[npt.ArrayLike], sticks: tuple[tuple[int, int], ...] = STICKS,
        fraction: float = 0.5) -> float:
    """Percentage of correct parts: a stick is correct when both predicted end points lie
    within ``fraction`` of its true length of their true positions (the LSP measure,
    here over the 13 sticks of the tree)."""
    ok = tot = 0
    for yt, yp in zip(Y_true, Y_pred):
        yt, yp = np.asarray(yt, float), np.asarray(yp, float)
        for a, b in sticks:
            L = fraction * np.hypot(*(yt[a] - yt[b]))
            ok += int(np.hypot(*(yp[a] - yt[a])) <= L and np.hypot(*(yp[b] - yt[b])) <= L)
            tot += 1
    return ok / max(tot, 1)


def pck(Y_true: list[npt.ArrayLike], Y_pred: list[npt.ArrayLike], tolerance: float = 2.0) -> float:
    """Fraction of joints within ``tolerance`` grid cells of the truth (1 - the model's loss)."""
    d = np.asarray(Y_true, float) - np.asarray(Y_pred, float)
    return float(np.mean((d ** 2).sum(-1) <= tolerance ** 2))


def time_generation(n: int = 20) -> float:  # pragma: no cover - used by the docs
    """Seconds per generated image (rendering and features), on n images."""
    t0 = time.perf_counter()
    make_pose(n, "train")
    return (time.perf_counter() - t0) / n


__all__ = ["load_pose", "make_pose", "make_pose_model", "render", "features", "hog_blocks", "to_grid", "to_pixels",
           "pose_image", "pcp",
           "pck", "PoseData", "PARENT", "JOINTS", "STICKS"]
