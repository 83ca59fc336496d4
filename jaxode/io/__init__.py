"""Scene files and saved state: ``load_sdf``, ``load_urdf``, ``save``/``load`` (.npz),
``load_mesh`` / ``add_mesh_geom`` (mesh files, extra ``jaxode[meshes]``)."""
from jaxode.io.mesh_files import add_mesh_geom, load_mesh
from jaxode.io.save import FORMAT_VERSION, load, save
from jaxode.io.sdf import load_sdf
from jaxode.io.urdf import load_urdf
from jaxode.io.xml_util import JaxodeFormatWarning

__all__ = ["save", "load", "FORMAT_VERSION", "load_sdf", "load_urdf", "JaxodeFormatWarning",
           "load_mesh", "add_mesh_geom"]
