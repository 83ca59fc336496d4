"""Extended tier: the smoothed-gradient targets of docs/GRADIENTS.md, at full size.

Truths: finite differences of the same rollouts (the 1e-2 central difference
of the bounce height; the central difference, h = 1e-2, of the smoothed
walker objective estimated with common random numbers), and for the system
identification the parameters that made the recording (recovered to 5 %).
Minutes each on a 2-core machine (batches of perturbed worlds, 200 Adam
iterations): ``pytest -m extended tests/test_grad_targets.py``.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
pytest.importorskip("optax")

pytestmark = pytest.mark.extended


def test_smoothed_bounce_gradient_has_the_sign_of_the_finite_difference():
    import smoothed_gradients as sg
    for row in sg.bounce_report(log=None):
        # the exact gradient disagrees in sign with the 1e-2 finite difference here
        assert np.sign(row["exact"]) != np.sign(row["fd"]), row
        # the zeroth-order (unbiased at jumps) smoothed gradient agrees, beyond its error bar
        assert np.sign(row["zeroth"]) == np.sign(row["fd"]), row
        assert abs(row["zeroth"]) > 2 * row["zeroth_se"], row
        # the first-order one averages the pieces' slopes and misses the jumps (its bias)
        assert np.sign(row["first"]) == np.sign(row["exact"]), row


def test_smoothed_walker_gradient_agrees_with_the_smoothed_finite_difference():
    import smoothed_gradients as sg
    out = sg.walker_report(exact=False, log=None)
    assert out["cos_smoothed_vs_cd"] >= 0.9, out


def test_smoothed_sysid_recovers_mu_erp_and_mass():
    import smoothed_sysid as ss
    model = ss.build_scene()
    theta, losses = ss.fit(model, ss.recording(model), log=None)
    err = theta / np.asarray(ss.TRUE) - 1
    assert np.all(np.abs(err) < 0.05), (theta, err)
