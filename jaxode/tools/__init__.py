"""User-level tools built on the step: RL environments (``envs``), parameter
sweeps (``sweep``), metrics of trajectories (``metrics``), plots (``plot``),
rendering (``rendering``) and smoothed gradients (``smoothing``: ``smooth``).
"""

from jaxode.tools.smoothing import SmoothedGradient, smooth  # noqa: E402,F401
