"""Scene files and saved state: ``save``/``load`` (.npz)."""
from jaxode.io.save import FORMAT_VERSION, load, save

__all__ = ["save", "load", "FORMAT_VERSION"]
