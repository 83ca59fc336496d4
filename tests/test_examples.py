"""The examples that make a claim are run and their claim checked.

``examples/system_identification.py``: gradient descent (optax Adam) through
``jaxode.rollout`` recovers the friction coefficient and the restitution that
generated a recorded trajectory, from wrong guesses. The truth is the value
the recording was made with.
"""
from __future__ import annotations

import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_system_identification_recovers_mu_and_bounce():
    sysid = _load("system_identification")
    with jax.enable_x64(True):
        import jaxode

        model = sysid.build_scene()
        state = jaxode.init(model)
        target = sysid.simulate(model, state, jnp.asarray(sysid.TRUE))
        vg = jax.jit(jax.value_and_grad(lambda th: sysid.loss(th, model, state, target)),
                     compiler_options={"xla_backend_optimization_level": 2})  # run-time bound
        theta, losses = sysid.fit(vg, sysid.GUESS, iterations=80, log=None)
    mu, bounce = np.asarray(theta)
    assert mu == pytest.approx(sysid.TRUE[0], rel=0.02)
    assert bounce == pytest.approx(sysid.TRUE[1], rel=0.02)
    assert losses[-1] < 1e-3 * losses[0]
