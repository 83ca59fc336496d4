"""Ready-made robots built with WorldBuilder."""
from jaxode.build.robots.quadruped import Walker, build_walker

__all__ = ["Walker", "build_walker"]
