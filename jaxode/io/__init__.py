"""Scene files and saved state: ``save``/``load`` (.npz), ``load_sdf``, ``load_urdf``."""
from jaxode.io._xml import JaxodeFormatWarning, SceneFileError
from jaxode.io.save import FORMAT_VERSION, load, save
from jaxode.io.sdf import load_sdf
from jaxode.io.urdf import load_urdf

__all__ = ["save", "load", "FORMAT_VERSION", "load_sdf", "load_urdf", "JaxodeFormatWarning",
           "SceneFileError"]
