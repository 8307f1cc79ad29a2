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
example (`structfw.executor_core.ExampleError`).

How the actors end:

- an executor closed while its calls still run (an exception, a second Ctrl-C, an
  ``oracle_timeout``) kills the actors running them (a hung oracle cannot be cancelled
  inside an actor); the next call starts new ones;
- `shutdown` kills them all;
- when this process exits, or dies by SIGTERM or SIGKILL, Ray ends the actors it owns
  (they are not detached), and a local cluster that ``ray.init`` started here ends with
  this process on exit and SIGTERM.  That is Ray's doing, not structfw's, and it has a
  gap: after a SIGKILL, Ray (2.60, Linux) leaves the local cluster's dashboard and
  runtime-env agents running (``ray stop`` ends them).  A cluster started with
  ``ray start`` keeps running, by design.

Ray looks at signals while it waits about once a second, so two Ctrl-C within that
second count as one: the second Ctrl-C that aborts a fit (`structfw._interrupt`)
must come at least a second after the first.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np
import numpy.typing as npt

from .executor_core import ExampleError, SerialExecutor, check_oracle_timeout, new_key, run_examples, timeout_error

if TYPE_CHECKING:
    from ray import ObjectRef

    from .executor_core import BoundData
    from .models.base import StructuredModel

#: how many times one call is sent again after its actor died
MAX_RESENDS = 3

#: a Ray actor handle of `_Worker`.  Any: ray's ActorHandle types every remote method as Never, so
#: the type checker would skip, unreported, all the code after a call such as ``actor.run.remote()``
_Actor: TypeAlias = Any

_ACTORS: list[_Actor | None] = []  # the actors of this process's pool (None: a killed one's place)
_BOUND: dict[int, Any] = {}  # key -> ObjectRef of (model, X, Y): what a new actor must hold
_ACTOR_CLASS: Any = None  # the ray.remote class of _Worker


def _ray() -> ModuleType:
    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("executor='ray' needs Ray: pip install 'structfw[distributed]'") from None
    return ray


class _Worker:
    """A Ray actor holding bound data sets and running oracles on them."""

    def __init__(self) -> None:
        self._data: dict[int, BoundData] = {}

    def bind(self, key: int, data: BoundData) -> None:
        self._data[key] = data

    def unbind(self, keys: Iterable[int]) -> None:
        for key in keys:
            self._data.pop(key, None)

    def run(self, key: int, augmented: bool, indices: Iterable[Any], w: npt.NDArray[np.float64]) -> list[Any]:
        return run_examples(self._data[key], augmented, indices, w)

    def pid(self) -> int:
        return os.getpid()


def _actor_class() -> Any:
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        # one CPU each, so a cluster runs as many oracles at once as it has cores
        _ACTOR_CLASS = _ray().remote(num_cpus=1)(_Worker)
    return _ACTOR_CLASS


_REMOTE_CLASSES: dict[type, Any] = {}  # class -> its ray.remote actor class (`remote_class`)


def remote_class(cls: type, num_cpus: int = 1) -> Any:
    """``ray.remote(num_cpus=...)(cls)``, made once a class: the actor class of the sharded engine's
    shards (`structfw.solvers.sharded.ShardHost`, one CPU each for the whole fit), joining the cluster
    first (`connect`)."""
    connect()
    if cls not in _REMOTE_CLASSES:
        _REMOTE_CLASSES[cls] = _ray().remote(num_cpus=num_cpus)(cls)
    return _REMOTE_CLASSES[cls]


def connect(address: str | None = None) -> int:
    """Join the Ray cluster at ``address`` (or RAY_ADDRESS), or start a local one; the cluster's CPUs."""
    ray = _ray()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING,
                 ignore_reinit_error=True)
    return int(ray.cluster_resources().get("CPU", 0))


def _new_actor() -> _Actor:
    actor = _actor_class().remote()
    for key, ref in _BOUND.items():
        actor.bind.remote(key, ref)
    return actor


def _actors(m: int) -> list[_Actor]:
    """The first m actors of the pool (started as needed, also in the places of killed ones)."""
    while len(_ACTORS) < m:
        _ACTORS.append(_new_actor())
    for j in range(m):
        if _ACTORS[j] is None:
            _ACTORS[j] = _new_actor()
    return cast("list[_Actor]", _ACTORS[:m])  # every place was filled above


def _replace_actor(j: int, dead: _Actor) -> _Actor:
    """Actor j died: a new one with every live data set (unless a previous call replaced it)."""
    if _ACTORS[j] is dead or _ACTORS[j] is None:
        _ACTORS[j] = _new_actor()
    return cast("_Actor", _ACTORS[j])  # filled above


def _kill_actor(actor: _Actor) -> None:
    """Kill a pool actor (it may be running an oracle that never returns); its place is refilled on demand."""
    for j, a in enumerate(_ACTORS):
        if a is actor:
            _ACTORS[j] = None
    try:
        _ray().kill(actor)
    except Exception:  # already dead, or the cluster is gone: nothing left to end
        pass


def shutdown() -> None:
    """Stop this process's actors (they otherwise live until the interpreter exits)."""
    ray = _ray()
    for actor in _ACTORS:
        if actor is not None:
            ray.kill(actor)
    _ACTORS.clear()
    _BOUND.clear()


class _Call:
    """One oracle call on actor j; result() waits for it and sends it again if the actor died."""

    def __init__(self, j: int, key: int, augmented: bool, indices: Collection[Any], w_ref: Any,
                 oracle_timeout: float | None = None, inflight: set[_Call] | None = None) -> None:
        self.j, self.args = j, (key, augmented, indices, w_ref)
        self.oracle_timeout = oracle_timeout
        self.actor = cast("_Actor", _ACTORS[j])  # the caller started the pool's actors (_actors)
        self.ref: ObjectRef[list[Any]] = self.actor.run.remote(*self.args)
        self.inflight: set[_Call] = inflight if inflight is not None else set()
        self.inflight.add(self)

    def result(self) -> list[Any]:
        out = self._result()
        # only a call that returned is surely over; close() asks Ray about the others (a timed-out or
        # abandoned call may still run, and then its actor is killed)
        self.inflight.discard(self)
        return out

    def _result(self) -> list[Any]:
        ray = _ray()
        limit = None if self.oracle_timeout is None else self.oracle_timeout * max(len(self.args[2]), 1)
        for _ in range(MAX_RESENDS + 1):
            try:
                return ray.get(self.ref, timeout=limit)
            except ray.exceptions.GetTimeoutError:
                # a timeout needs a limit, so oracle_timeout is set
                raise timeout_error(cast(float, self.oracle_timeout), cast(float, limit), self.args[2]) from None
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
    oracle_timeout : float or None
        Seconds one example's oracle may take: a call on k examples not back after
        k * oracle_timeout seconds raises `structfw.executor.OracleTimeout`
        naming its examples, and `close` then kills its actor.
    """

    def __init__(self, n_jobs: int | None = None, address: str | None = None,
                 oracle_timeout: float | None = None) -> None:
        oracle_timeout = check_oracle_timeout(oracle_timeout)
        cpus = connect(address)
        if n_jobs is None or n_jobs == -1:
            n_jobs = max(cpus, 1)
        if n_jobs > max(cpus, 1):
            raise ValueError(f"n_jobs={n_jobs} Ray workers asked for, but the cluster has {cpus} CPUs "
                             f"(each worker takes one); give n_jobs <= {cpus} or -1")
        super().__init__()
        self.n_jobs = int(n_jobs)
        self.address = address
        self._keys: dict[int, int] = {}  # key -> number of examples (the data live in the object store)
        self._next = 0  # round robin for single calls
        self.oracle_timeout = oracle_timeout
        self._inflight: set[_Call] = set()  # calls whose result was not taken yet

    def bind(self, model: StructuredModel, X: Sequence[Any], Y: Sequence[Any] | None = None) -> int:
        """Put (model, X, Y) into the object store once and on every actor; a handle for the calls."""
        ray = _ray()
        key = new_key()
        _BOUND[key] = ray.put((model, X, Y))
        for actor in _actors(self.n_jobs):
            actor.bind.remote(key, _BOUND[key])
        self._keys[key] = len(X)
        return key

    def submit(self, key: int, w: npt.NDArray[np.float64], indices: Collection[Any]) -> _Call:
        """Start loss-augmented decoding of ``indices`` at w on the next actor; a future."""
        j = self._next % self.n_jobs
        self._next += 1
        _actors(self.n_jobs)
        return _Call(j, key, True, np.asarray(indices, np.int64), w, self.oracle_timeout, self._inflight)

    def _size(self, key: int) -> int:
        return self._keys[key]

    def _map(self, key: int, augmented: bool, indices: Iterable[Any] | None, w: npt.NDArray[np.float64]) -> list[Any]:
        idx = np.arange(self._size(key)) if indices is None else np.asarray(indices, np.int64)
        _actors(self.n_jobs)
        w_ref = _ray().put(np.asarray(w))  # sent once, read by every actor
        bounds = np.linspace(0, len(idx), self.n_jobs + 1).astype(int)
        calls = [_Call(j, key, augmented, idx[a:b], w_ref, self.oracle_timeout, self._inflight)
                 for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])) if b > a]
        out = []
        for call in calls:
            out.extend(call.result())
        return out

    def close(self) -> None:
        """Drop this executor's data sets from the actors; kill the actors of calls still running.

        After a normal end the actors stay for the next fit; a call still running (an
        exception, a second Ctrl-C or a timeout left it) may never return, so its actor
        is killed."""
        self._kill_busy_actors()
        keys = list(self._keys)
        for key in keys:
            _BOUND.pop(key, None)
        if keys:
            for actor in _ACTORS:
                if actor is not None:
                    actor.unbind.remote(keys)
        self._keys = {}
        super().close()

    def _kill_busy_actors(self) -> None:
        calls = list(self._inflight)
        self._inflight.clear()
        if not calls:
            return
        ray = _ray()
        try:
            ready, _ = ray.wait([c.ref for c in calls], num_returns=len(calls), timeout=0)
        except Exception:  # the cluster is gone: so are its actors
            return
        ready = set(ready)
        for call in calls:
            if call.ref not in ready:
                _kill_actor(call.actor)
