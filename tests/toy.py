"""A tiny enumerable structured problem and the exact optimum of its dual QP.

Example i has labellings 0..m-1 with random joint features phi[i, y] and losses
L[i, y] (L[i, y_i] = 0).  Everything is small enough to enumerate, so the SSVM
dual (eq. (3) of Osokin et al. 2016) can be solved exactly with cvxopt.
"""
import numpy as np

from structfw.models.base import StructuredModel


class EnumModel(StructuredModel):
    """x is the example index; phi(x, y) = table[x, y]; Delta = loss table."""

    def __init__(self, phi, loss):
        self.phi = np.asarray(phi, float)      # (n, m, d)
        self.loss_table = np.asarray(loss, float)  # (n, m)  loss vs the label y_i stored below
        self.size_joint_feature = self.phi.shape[2]

    def joint_feature(self, x, y):
        return self.phi[int(x), int(y)].copy()

    def loss(self, y_true, y):
        # labels are (example, label) pairs encoded as x*1000 + label
        i, a = divmod(int(y_true), 1000)
        _, b = divmod(int(y), 1000)
        return float(self.loss_table[i, b]) if a != b else 0.0

    def _scores(self, x, w):
        return self.phi[int(x)] @ w

    def loss_augmented_decode(self, x, y_true, w):
        i = int(x)
        s = self._scores(x, w) + np.array([self.loss(y_true, i * 1000 + b) for b in range(self.phi.shape[1])])
        return i * 1000 + int(np.argmax(s))

    def decode(self, x, w):
        return int(x) * 1000 + int(np.argmax(self._scores(x, w)))

    def joint_feature_label(self, x, y):
        return self.phi[int(x), int(y) % 1000]

    def psi(self, x, y_true, y):
        return self.phi[int(x), int(y_true) % 1000] - self.phi[int(x), int(y) % 1000]

    def label_key(self, y):
        return int(y)


def make_toy(n=4, m=4, d=3, seed=0):
    rng = np.random.default_rng(seed)
    phi = rng.normal(size=(n, m, d))
    loss = rng.uniform(0.2, 1.0, size=(n, m))
    truth = rng.integers(0, m, n)
    for i in range(n):
        loss[i, truth[i]] = 0.0
    model = EnumModel(phi, loss)
    X = list(range(n))
    Y = [i * 1000 + int(truth[i]) for i in range(n)]
    return model, X, Y


def exact_optimum(model, X, Y, lam):
    """min_alpha lam/2 ||A alpha||^2 - b^T alpha over n simplices, by cvxopt; returns (D*, w*)."""
    import cvxopt
    from cvxopt import solvers

    n = len(X)
    m = model.phi.shape[1]
    cols, b = [], []
    for i in range(n):
        for yl in range(m):
            y = i * 1000 + yl
            cols.append(model.psi(X[i], Y[i], y) / (lam * n))
            b.append(model.loss(Y[i], y) / n)
    A = np.array(cols).T
    b = np.array(b)
    P = lam * A.T @ A + 1e-12 * np.eye(A.shape[1])
    q = -b
    G = -np.eye(A.shape[1])
    h = np.zeros(A.shape[1])
    Aeq = np.zeros((n, n * m))
    for i in range(n):
        Aeq[i, i * m:(i + 1) * m] = 1.0
    solvers.options["show_progress"] = False
    solvers.options["abstol"] = 1e-12
    solvers.options["reltol"] = 1e-12
    solvers.options["feastol"] = 1e-12
    sol = solvers.qp(cvxopt.matrix(P), cvxopt.matrix(q), cvxopt.matrix(G), cvxopt.matrix(h),
                     cvxopt.matrix(Aeq), cvxopt.matrix(np.ones(n)))
    alpha = np.array(sol["x"]).ravel()
    w = A @ alpha
    D = -0.5 * lam * w @ w + b @ alpha
    return D, w


def primal(model, X, Y, lam, w):
    n = len(X)
    H = 0.0
    for x, y in zip(X, Y):
        ys = model.loss_augmented_decode(x, y, w)
        H += model.loss(y, ys) - model.psi(x, y, ys) @ w
    return 0.5 * lam * w @ w + H / n


def exact_dual_from_alpha(problem, state):
    """D(alpha) recomputed from the explicit active sets (for checks):
    w = sum_i sum_y alpha_i(y) psi_i(y)/(lam n), l = sum alpha_i(y) L_i(y)/n."""
    from structfw._linalg import axpy

    w = np.zeros(problem.d)
    ell = 0.0
    for cs in state.corners:
        for k, psi in enumerate(cs.psi):
            if cs.alpha[k] > 0:
                axpy(cs.alpha[k] / (problem.lam * problem.n), psi, w)
                ell += cs.alpha[k] * cs.loss[k] / problem.n
    return -0.5 * problem.lam * float(w @ w) + ell, w, ell


def primal_qp_optimum(corners, n, d, lam, S=()):
    """min_{w, xi} lam/2 ||w||^2 + 1/n sum xi_i  s.t. xi_i >= L - <w, psi> for every corner
    (i, psi, L), and w_S >= 0 (cvxopt); returns w*."""
    import cvxopt
    from cvxopt import solvers

    P = np.zeros((d + n, d + n))
    P[:d, :d] = lam * np.eye(d)
    P[d:, d:] = 1e-12 * np.eye(n)
    q = np.concatenate([np.zeros(d), np.ones(n) / n])
    G, h = [], []
    for i, psi, L in corners:
        row = np.zeros(d + n)
        row[:d], row[d + i] = -psi, -1.0
        G.append(row)
        h.append(-L)
    for j in S:
        row = np.zeros(d + n)
        row[j] = -1.0
        G.append(row)
        h.append(0.0)
    solvers.options.update(show_progress=False, abstol=1e-12, reltol=1e-12, feastol=1e-12)
    sol = solvers.qp(cvxopt.matrix(P), cvxopt.matrix(q), cvxopt.matrix(np.array(G)), cvxopt.matrix(np.array(h)))
    return np.array(sol["x"]).ravel()[:d]


def corners_primal(corners, n, lam, w):
    """lam/2 ||w||^2 + mean_i max over example i's corners of L - <w, psi> (each i has y_i's zero corner)."""
    hinge = np.zeros(n)
    for i, psi, L in corners:
        hinge[i] = max(hinge[i], L - psi @ w)
    return lam / 2 * w @ w + hinge.mean()
