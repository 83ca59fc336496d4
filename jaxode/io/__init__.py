"""Reading and writing worlds: saved models and states (``save``/``load``)."""
from jaxode.io.save import FORMAT_VERSION, load, save

__all__ = ["save", "load", "FORMAT_VERSION"]
