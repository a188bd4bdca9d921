from __future__ import annotations

import numpy as np

from localmem.bench.fit import fit_logistic
from localmem.bench.metrics import clean_evidence


def test_clean_evidence_splits_and_counts_malformed() -> None:
    ids, bad = clean_evidence(["D1:3", "D8:6; D9:17", "D", "D1:3"])
    assert ids == ["D1:3", "D8:6", "D9:17"]
    assert bad == 1


def test_fit_logistic_reaches_the_regularised_optimum() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    true = np.array([2.0, -1.0, 0.0])
    y = (rng.random(400) < 1 / (1 + np.exp(-(x @ true - 0.5)))).astype(float)
    sw = rng.uniform(0.5, 1.5, size=400)
    w = fit_logistic(x, y, sw, c=1.0)
    coef, b = np.array(w.coef), w.intercept
    p = 1 / (1 + np.exp(-(x @ coef + b)))
    # first-order optimality: gradient of 0.5|w|^2 + C*sum(sw*logloss) vanishes
    assert np.allclose(coef + x.T @ (sw * (p - y)), 0, atol=1e-6)
    assert abs(np.sum(sw * (p - y))) < 1e-6
    assert coef[0] > 1.0 and coef[1] < -0.5 and abs(coef[2]) < 0.5


def test_fit_logistic_on_top_of_a_far_offset_converges() -> None:
    # `bench fit --free` fits features on top of the shipped logit (intercept ~ -11): at
    # w = 0 every p is ~0, the Hessian is tiny and a full Newton step lands at ~1e6.
    rng = np.random.default_rng(0)
    n = 5000
    x = np.stack([rng.uniform(3, 7, n), rng.uniform(0, 1, n)], 1)
    y = (rng.random(n) < 0.02).astype(float)
    sw = np.full(n, 50.0)
    off = -11.0 + 2.0 * x[:, 1]
    w = fit_logistic(x, y, sw, offset=off, intercept=False)
    coef = np.array(w.coef)
    assert np.all(np.isfinite(coef)) and np.all(np.abs(coef) < 10)
    p = 1 / (1 + np.exp(-(off + x @ coef)))
    assert np.allclose(coef + x.T @ (sw * (p - y)), 0, atol=1e-4)  # the optimum, not a stop
    assert abs(p.mean() - y.mean()) < 0.01
