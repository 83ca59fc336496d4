"""Conformance, the joint scenes (``joint*`` and the ``batch_joint*`` batch).

The same tests as test_conformance.py, which holds the other half: the two
halves are two files so that pytest-xdist (``--dist loadfile``) builds their
module fixtures (every scene in libode and in jaxode) on two workers at once.
This file runs test_conformance.py's code in its own namespace with
``JOINTS = True``; there is one copy of the tests.
"""
import pathlib

JOINTS = True
_SOURCE = pathlib.Path(__file__).with_name("test_conformance.py")
exec(compile(_SOURCE.read_text(), str(_SOURCE), "exec"))
