"""Ctrl-C at random moments of a fit, as a user would press it (shared by the solver tests)."""
import _thread
import threading
import warnings

import numpy as np


def check_interrupted_fits(make_svm, X, Y, rng, times, check_state):
    """Fit ``times`` long runs, each interrupted by a SIGINT after a random 0.05-0.4 s.

    Each must end "interrupted" with a finite w that predicts, a state that ``check_state``
    accepts, and a warning-free warm continuation that ends normally."""
    make_svm(1).fit(X, Y)  # compile first, so the timers fall inside the solve
    for _ in range(times):
        svm = make_svm(100000)
        timer = threading.Timer(float(rng.uniform(0.05, 0.4)), _thread.interrupt_main)
        timer.start()
        try:
            svm.fit(X, Y)
        finally:
            timer.cancel()
        assert svm.stopped_ == "interrupted"
        assert np.all(np.isfinite(svm.coef_))
        assert len(svm.predict(X[:3])) == 3
        check_state(svm.state_)
        # the state is consistent: the fit can be continued
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            svm.set_params(warm_start=True, max_passes=1).fit(X, Y)
        assert svm.stopped_ == "max_passes"
