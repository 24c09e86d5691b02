"""The package's version, in one place: pyproject.toml reads it, and so does every module that
records it (manifests, calibration.json, the report), without importing the package root."""
__version__ = "0.1.0"
