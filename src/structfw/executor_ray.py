"""The Ray executor: oracles on the actors of a Ray cluster (``pip install structfw[distributed]``).

A bound data set is put once into Ray's object store and every actor holds it (actors
on one node map the same shared-memory copy, without a copy each; a remote node fetches
it once).  Each call then sends w -- once per call, through the object store, however
many actors it reaches -- and block indices.  Whole data sets on every actor, rather
than one shard each, let a minibatch of tau blocks split evenly over the workers
whichever blocks the sampler drew; the price is one copy of the data per node.

The actors outlive one fit (they keep their imported modules and loaded numba
kernels, which take seconds to load in a new process); a fit's data leave them when
its executor closes.  An actor that dies is recreated, the live data sets are bound
to it again and its calls are sent again; an oracle that raises is named by its
example (:class:`structfw.executor.ExampleError`).
"""
from __future__ import annotations

import logging
import os

import numpy as np

from .executor import _KEYS, ExampleError, SerialExecutor, _run

#: how many times one call is sent again after its actor died
MAX_RESENDS = 3

_ACTORS: list = []  # the actors of this process's pool, shared by every RayExecutor
_BOUND: dict = {}  # key -> ObjectRef of (model, X, Y): what a new actor must hold
_ACTOR_CLASS = None


def _ray():
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("executor='ray' needs Ray: pip install 'structfw[distributed]'") from None
    return ray


class _Worker:
    """A Ray actor holding bound data sets and running oracles on them."""

    def __init__(self):
        self._data = {}

    def bind(self, key, data):
        self._data[key] = data

    def unbind(self, keys):
        for key in keys:
            self._data.pop(key, None)

    def run(self, key, augmented, indices, w):
        return _run(self._data[key], augmented, indices, w)

    def pid(self):
        return os.getpid()


def _actor_class():
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        # one CPU each, so a cluster runs as many oracles at once as it has cores
        _ACTOR_CLASS = _ray().remote(num_cpus=1)(_Worker)
    return _ACTOR_CLASS


def connect(address=None):
    """Join the Ray cluster at ``address`` (or RAY_ADDRESS), or start a local one; the cluster's CPUs."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING,
                 ignore_reinit_error=True)
    return int(ray.cluster_resources().get("CPU", 0))


def _new_actor():
    actor = _actor_class().remote()
    for key, ref in _BOUND.items():
        actor.bind.remote(key, ref)
    return actor


def _actors(m):
    """The first m actors of the pool (started as needed)."""
    while len(_ACTORS) < m:
        _ACTORS.append(_new_actor())
    return _ACTORS[:m]


def _replace_actor(j, dead):
    """Actor j died: a new one with every live data set (unless a previous call replaced it)."""
    if _ACTORS[j] is dead:
        _ACTORS[j] = _new_actor()
    return _ACTORS[j]


def shutdown():
    """Stop this process's actors (they otherwise live until the interpreter exits)."""
    ray = _ray()
    for actor in _ACTORS:
        ray.kill(actor)
    _ACTORS.clear()
    _BOUND.clear()


class _Call:
    """One oracle call on actor j; result() waits for it and sends it again if the actor died."""

    def __init__(self, j, key, augmented, indices, w_ref):
        self.j, self.args = j, (key, augmented, indices, w_ref)
        self.actor = _ACTORS[j]
        self.ref = self.actor.run.remote(*self.args)

    def result(self):
        ray = _ray()
        for _ in range(MAX_RESENDS + 1):
            try:
                return ray.get(self.ref)
            except ray.exceptions.RayActorError:
                self.actor = _replace_actor(self.j, self.actor)
                self.ref = self.actor.run.remote(*self.args)
            except ray.exceptions.RayTaskError as err:
                cause = getattr(err, "cause", None)
                if isinstance(cause, ExampleError):
                    raise ExampleError(str(cause)) from None
                raise
        blocks = [int(i) for i in self.args[2]]
        raise RuntimeError(f"Ray actor {self.j} died {MAX_RESENDS + 1} times running the oracles of "
                           f"examples {blocks[:10]}{'...' if len(blocks) > 10 else ''}; giving up")


class RayExecutor(SerialExecutor):
    """Runs oracles on ``n_jobs`` actors of a Ray cluster that hold the bound data sets.

    Parameters
    ----------
    n_jobs : int or None
        Actors (one CPU each); None or -1: one per CPU of the cluster.
    address : str or None
        The cluster to join (``"auto"``, ``"ray://head:10001"``, ...); None: the one
        named by RAY_ADDRESS, else a local cluster started on this machine.
    """

    def __init__(self, n_jobs=None, address=None):
        cpus = connect(address)
        if n_jobs is None or n_jobs == -1:
            n_jobs = max(cpus, 1)
        if n_jobs > max(cpus, 1):
            raise ValueError(f"n_jobs={n_jobs} Ray workers asked for, but the cluster has {cpus} CPUs "
                             f"(each worker takes one); give n_jobs <= {cpus} or -1")
        super().__init__()
        self.n_jobs = int(n_jobs)
        self.address = address
        self._keys = {}  # key -> number of examples (the data live in the object store)
        self._next = 0  # round robin for single calls

    def bind(self, model, X, Y=None):
        """Put (model, X, Y) into the object store once and on every actor; a handle for the calls."""
        ray = _ray()
        key = next(_KEYS)
        _BOUND[key] = ray.put((model, X, Y))
        for actor in _actors(self.n_jobs):
            actor.bind.remote(key, _BOUND[key])
        self._keys[key] = len(X)
        return key

    def submit(self, key, w, indices):
        """Start loss-augmented decoding of ``indices`` at w on the next actor; a future."""
        j = self._next % self.n_jobs
        self._next += 1
        _actors(self.n_jobs)
        return _Call(j, key, True, np.asarray(indices, np.int64), w)

    def _size(self, key):
        return self._keys[key]

    def _map(self, key, augmented, indices, w):
        idx = np.arange(self._size(key)) if indices is None else np.asarray(indices, np.int64)
        _actors(self.n_jobs)
        w_ref = _ray().put(np.asarray(w))  # sent once, read by every actor
        bounds = np.linspace(0, len(idx), self.n_jobs + 1).astype(int)
        calls = [_Call(j, key, augmented, idx[a:b], w_ref)
                 for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])) if b > a]
        out = []
        for call in calls:
            out.extend(call.result())
        return out

    def close(self):
        """Drop this executor's data sets from the actors (the actors stay for the next fit)."""
        keys = list(self._keys)
        for key in keys:
            _BOUND.pop(key, None)
        if keys:
            for actor in _ACTORS:
                actor.unbind.remote(keys)
        self._keys = {}
        super().close()
