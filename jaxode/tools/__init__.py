"""User-level tools built on the step: RL environments (``envs``), parameter
sweeps (``sweep``), metrics of trajectories (``metrics``), plots (``plot``) and
rendering (``rendering``).
"""
