"""Small XML helpers shared by the SDF and URDF loaders (stdlib only).

:func:`parse` reads a file or an XML string with ``xml.parsers.expat`` into a
tree of :class:`Node` objects that remember their line number, so that every
error and warning can name the file (``"<string>"`` for text), the line and
the element. :class:`Reporter` turns unsupported elements into one
:class:`JaxodeFormatWarning` per element name.
"""
from __future__ import annotations

import math
import os
import re
import warnings
import xml.parsers.expat
from typing import Optional

import numpy as np


class JaxodeFormatWarning(UserWarning):
    """An element or value of a scene file that jaxode does not interpret."""


class Node:
    """One XML element: ``tag``, ``attrib`` (dict), ``children``, ``text``
    (stripped character data) and ``line`` (1-based line of its start tag)."""

    __slots__ = ("tag", "attrib", "children", "text", "line", "parent")

    def __init__(self, tag: str, attrib: dict, line: int, parent: Optional["Node"] = None):
        self.tag, self.attrib, self.line, self.parent = tag, dict(attrib), line, parent
        self.children: list[Node] = []
        self.text = ""

    def find(self, tag: str) -> Optional["Node"]:
        for c in self.children:
            if c.tag == tag:
                return c
        return None

    def findall(self, tag: str) -> list["Node"]:
        return [c for c in self.children if c.tag == tag]

    def path(self, *tags: str) -> Optional["Node"]:
        """The first descendant along ``tags`` (``None`` if a step is missing)."""
        n: Optional[Node] = self
        for t in tags:
            n = n.find(t) if n is not None else None
        return n

    def __repr__(self) -> str:
        return f"<{self.tag}> at line {self.line}"


def _looks_like_xml(source) -> bool:
    return isinstance(source, str) and source.lstrip().startswith("<")


def parse(source) -> tuple[Node, str]:
    """Parse ``source`` (a path, or a string of XML starting with ``<``).

    Returns (root node, name) with name the path or ``"<string>"``. Malformed
    XML raises ``ValueError("name:line: XML error: ...")``. Whitespace before
    the ``<?xml`` declaration and whitespace or NUL bytes after the root
    element are dropped (files as ROS tools and PyBullet's data write them;
    TinyXML, which Gazebo's SDFormat and PyBullet read with, accepts them);
    line numbers still count from the file's first line.
    """
    if isinstance(source, (str, bytes)) and not (source.strip() if isinstance(source, str)
                                                 else source.strip(b" \t\r\n\x00")):
        raise ValueError(f"<string>: empty input ({source!r:.40}): expected a file path or a "
                         f"string of XML starting with '<'")
    if _looks_like_xml(source):
        name, data = "<string>", source.encode("utf-8")
    else:
        name = os.fspath(source)
        try:
            with open(name, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"{name}: cannot read the file ({e.strerror})") from None
    body = data.lstrip()
    offset = data[:len(data) - len(body)].count(b"\n")
    data = body.rstrip(b" \t\r\n\x00")
    try:
        return _parse_bytes(data, name, offset), name
    except _XMLError as strict:
        # TinyXML (Gazebo's SDFormat, PyBullet) reads what expat refuses in shipped
        # files: "--" inside comments, a comment before the <?xml declaration,
        # unquoted attribute values. Read such a file the same way, with a warning.
        try:
            root = _parse_bytes(_lenient(data), name, offset)
        except _XMLError:
            raise ValueError(str(strict)) from None
        warnings.warn(f"{strict}; read leniently as TinyXML (Gazebo's and PyBullet's XML parser) "
                      f"reads it", JaxodeFormatWarning, stacklevel=2)
        return root, name


class _XMLError(ValueError):
    pass


_COMMENT = re.compile(rb"<!--.*?-->", re.S)
_DECL = re.compile(rb"<\?xml[^>]*\?>")
_TAG = re.compile(rb"<[A-Za-z_][^<>]*>")
_UNQUOTED = re.compile(rb"(\s[A-Za-z_:][-\w:.]*)\s*=\s*([^\s\"'=<>`/][^\s\"'=<>`]*)")


def _lenient(data: bytes) -> bytes:
    """``data`` with comments and XML declarations blanked (their newlines
    kept, so line numbers stay) and unquoted attribute values quoted."""
    def blank(m):
        return b"\n" * m.group(0).count(b"\n")
    data = _COMMENT.sub(blank, data)
    data = _DECL.sub(blank, data)
    return _TAG.sub(lambda m: _UNQUOTED.sub(rb'\1="\2"', m.group(0)), data)


def _parse_bytes(data: bytes, name: str, offset: int) -> "Node":
    parser = xml.parsers.expat.ParserCreate()
    stack: list[Node] = []
    root: list[Node] = []
    text: list[list[str]] = []

    def start(tag, attrs):
        n = Node(tag, attrs, parser.CurrentLineNumber + offset, stack[-1] if stack else None)
        if stack:
            stack[-1].children.append(n)
        else:
            root.append(n)
        stack.append(n)
        text.append([])

    def end(tag):
        n = stack.pop()
        n.text = "".join(text.pop()).strip()

    def chars(data):
        if text:
            text[-1].append(data)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as e:
        where = f" in <{stack[-1].tag}> (opened at line {stack[-1].line})" if stack else ""
        raise _XMLError(f"{name}:{e.lineno + offset}: XML error{where}: "
                        f"{xml.parsers.expat.ErrorString(e.code)}") from None
    return root[0]


class Reporter:
    """Errors and once-per-element-name warnings for one file."""

    def __init__(self, name: str, commas: bool = False):
        """``commas``: number lists may separate numbers with commas too (URDF
        as PyBullet reads it; SDFormat does not)."""
        self.name = name
        self.commas = commas
        self.warned: set[str] = set()
        self.unsupported: list[tuple[str, int, str]] = []

    def where(self, node: Node) -> str:
        return f"{self.name}:{node.line}: <{node.tag}>"

    def error(self, node: Node, msg: str) -> ValueError:
        return ValueError(f"{self.where(node)}: {msg}")

    def warn(self, node: Node, msg: str = "not supported, ignored", key: Optional[str] = None) -> None:
        """Record ``node`` as not interpreted; warn once per ``key`` (default the tag)."""
        key = key or node.tag
        self.unsupported.append((node.tag, node.line, msg))
        if key in self.warned:
            return
        self.warned.add(key)
        warnings.warn(f"{self.where(node)}: {msg}", JaxodeFormatWarning, stacklevel=4)

    # ------------------------------------------------------------- values
    def floats(self, node: Node, n: Optional[int] = None, text: Optional[str] = None) -> np.ndarray:
        s = node.text if text is None else text
        parts = s.replace(",", " ").split() if self.commas else s.split()
        try:
            v = np.array([float(x) for x in parts], dtype=np.float64)
        except ValueError:
            raise self.error(node, f"expected numbers (got {s!r})") from None
        if n is not None and v.size != n:
            raise self.error(node, f"expected {n} numbers (got {v.size}: {s!r})")
        if np.any(np.isnan(v)):
            raise self.error(node, f"NaN is not allowed (got {s!r})")
        return v

    def float(self, node: Node, text: Optional[str] = None) -> float:
        return float(self.floats(node, 1, text)[0])

    def child_float(self, node: Node, tag: str, default=None):
        c = node.find(tag)
        return default if c is None else self.float(c)

    def child_bool(self, node: Node, tag: str, default: bool = False) -> bool:
        c = node.find(tag)
        if c is None:
            return default
        t = c.text.strip().lower()
        if t in ("1", "true"):
            return True
        if t in ("0", "false"):
            return False
        raise self.error(c, f"expected true/false/1/0 (got {c.text!r})")

    def attr_floats(self, node: Node, key: str, n: int, default) -> np.ndarray:
        if key not in node.attrib:
            return np.asarray(default, dtype=np.float64)
        try:
            return self.floats(node, n, node.attrib[key])
        except ValueError:
            raise self.error(node, f"attribute {key!r}: expected {n} numbers "
                                   f"(got {node.attrib[key]!r})") from None


# ------------------------------------------------------------------ rotations
def rpy_to_mat(rpy) -> np.ndarray:
    """Fixed-axis XYZ roll-pitch-yaw [rad] to a rotation matrix:
    ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)`` (SDF ``<pose>``, URDF ``rpy``)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def transform(xyz=(0.0, 0.0, 0.0), rpy=(0.0, 0.0, 0.0)) -> np.ndarray:
    """4x4 homogeneous transform from a translation [m] and roll-pitch-yaw [rad]."""
    t = np.eye(4)
    t[:3, :3] = rpy_to_mat(rpy)
    t[:3, 3] = np.asarray(xyz, dtype=np.float64)
    return t


def inv(t: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = t[:3, :3].T
    out[:3, 3] = -t[:3, :3].T @ t[:3, 3]
    return out


def mat_to_quat(r: np.ndarray) -> np.ndarray:
    """Rotation matrix to unit quaternion (w, x, y, z), w >= 0."""
    from jaxode.build.builder import _mat_to_quat
    return _mat_to_quat(np.asarray(r, dtype=np.float64))
