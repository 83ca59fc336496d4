"""Scene files and saved state: ``load_sdf``, ``load_urdf``, ``save``/``load`` (.npz)."""
from jaxode.io.save import FORMAT_VERSION, load, save
from jaxode.io.sdf import load_sdf
from jaxode.io.urdf import load_urdf
from jaxode.io.xml_util import JaxodeFormatWarning

__all__ = ["save", "load", "FORMAT_VERSION", "load_sdf", "load_urdf", "JaxodeFormatWarning"]
