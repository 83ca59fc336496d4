"""A tiny XML tree with line numbers (stdlib ``xml.parsers.expat``), and the
warning/error policy of the scene-file loaders."""
from __future__ import annotations

import os
import warnings
from typing import Optional
from xml.parsers import expat

import numpy as np


class JaxodeFormatWarning(UserWarning):
    """An element of a scene file that jaxode does not simulate (named with its line)."""


class SceneFileError(ValueError):
    """A malformed scene file or a bad value; the message names file, line and element."""


class Node:
    """An XML element: ``tag``, ``attrib``, ``text`` (stripped), ``children``, ``line``."""

    __slots__ = ("tag", "attrib", "text", "children", "line", "used")

    def __init__(self, tag: str, attrib: dict, line: int):
        self.tag, self.attrib, self.line = tag, attrib, line
        self.text, self.children, self.used = "", [], False

    def find(self, tag: str) -> Optional["Node"]:
        for c in self.children:
            if c.tag == tag:
                return c
        return None

    def findall(self, tag: str) -> list:
        return [c for c in self.children if c.tag == tag]


class Doc:
    """A parsed file: ``root`` Node, ``name`` (path or "<string>") for messages,
    ``base`` directory for relative URIs, and the warn-once bookkeeping."""

    def __init__(self, source, kind: str):
        text, self.name, self.base = _read(source)
        stack: list = []
        self.root: Optional[Node] = None
        p = expat.ParserCreate()

        def start(tag, attrib):
            n = Node(tag, dict(attrib), p.CurrentLineNumber)
            if stack:
                stack[-1].children.append(n)
            else:
                self.root = n
            stack.append(n)

        def end(tag):
            n = stack.pop()
            n.text = n.text.strip()

        def data(s):
            if stack:
                stack[-1].text += s

        p.StartElementHandler, p.EndElementHandler, p.CharacterDataHandler = start, end, data
        try:
            p.Parse(text, True)
        except expat.ExpatError as e:
            raise SceneFileError(f"{self.name}:{e.lineno}: malformed {kind} XML: "
                                 f"{expat.ErrorString(e.code)}") from None
        self.warned: set = set()

    def where(self, node: Node) -> str:
        return f"{self.name}:{node.line}: <{node.tag}>"

    def error(self, node: Node, msg: str) -> SceneFileError:
        return SceneFileError(f"{self.where(node)}: {msg}")

    def warn(self, node: Node, msg: str) -> None:
        """Warn once per element name (the first occurrence's line)."""
        if node.tag in self.warned:
            return
        self.warned.add(node.tag)
        warnings.warn(f"{self.where(node)}: {msg}", JaxodeFormatWarning, stacklevel=4)

    # ---- values
    def floats(self, node: Node, n: Optional[int] = None) -> np.ndarray:
        node.used = True
        try:
            v = np.array([float(x) for x in node.text.split()], dtype=np.float64)
        except ValueError:
            raise self.error(node, f"expected numbers (got {node.text!r})") from None
        if n is not None and v.size != n:
            raise self.error(node, f"expected {n} numbers (got {node.text!r})")
        if not np.all(np.isfinite(v)) and node.tag not in ("lower", "upper", "max_vel", "mu", "mu2"):
            raise self.error(node, f"expected finite numbers (got {node.text!r})")
        return v

    def num(self, parent: Optional[Node], tag: str, default=None):
        node = None if parent is None else parent.find(tag)
        if node is None:
            return default
        return float(self.floats(node, 1)[0])

    def vec(self, parent: Optional[Node], tag: str, n: int, default=None):
        node = None if parent is None else parent.find(tag)
        if node is None:
            return default
        return self.floats(node, n)


def _read(source):
    """(text, name, base dir) of a path or an XML string."""
    if isinstance(source, (bytes, bytearray)):
        source = source.decode()
    s = os.fspath(source) if not isinstance(source, str) else source
    if s.lstrip().startswith("<"):
        return s, "<string>", os.getcwd()
    if not os.path.isfile(s):
        raise SceneFileError(f"{s}: no such file")
    with open(s, "r", encoding="utf-8") as f:
        return f.read(), s, os.path.dirname(os.path.abspath(s))


def quat_mul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def quat_rot(q, v):
    w, x, y, z = q
    r = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                  [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                  [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return r @ np.asarray(v, dtype=np.float64)


def quat_conj(q):
    return np.array([q[0], -q[1], -q[2], -q[3]])


def rpy_quat(r, p, y):
    """Quaternion (w, x, y, z) of fixed-axis roll-pitch-yaw (R = Rz(y) Ry(p) Rx(r)), as SDF/URDF."""
    cr, sr, cp, sp, cy, sy = (np.cos(r / 2), np.sin(r / 2), np.cos(p / 2), np.sin(p / 2),
                              np.cos(y / 2), np.sin(y / 2))
    return np.array([cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
                     cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy])


class Pose:
    """A rigid transform: position ``p`` and quaternion ``q``; ``a * b`` composes."""

    def __init__(self, p=(0.0, 0.0, 0.0), q=(1.0, 0.0, 0.0, 0.0)):
        self.p, self.q = np.asarray(p, np.float64), np.asarray(q, np.float64)

    def __mul__(self, o: "Pose") -> "Pose":
        return Pose(self.p + quat_rot(self.q, o.p), quat_mul(self.q, o.q))

    def inv(self) -> "Pose":
        qc = quat_conj(self.q)
        return Pose(-quat_rot(qc, self.p), qc)
