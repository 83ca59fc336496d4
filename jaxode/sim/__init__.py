"""The traced step: every module here runs inside ``jit``/``vmap``/``grad``.

Stages (``pipeline.physics_step`` calls them in this order, each a function of
the model, the per-world params and the records of earlier stages):
``dynamics.bodies`` -> ``narrowphase.detect`` (``collision/``) -> ``rowset.build``
(``joints/``, ``constraint``) -> ``dynamics.accelerate`` -> ``solver.solve_rows``
(``solver/``) -> ``integrate.advance`` + ``rowset.record``. Records are in
``records.py``. Nothing here reads files or builds numpy tables (see
``jaxode.build``).
"""
