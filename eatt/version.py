"""The package version (its own module: a stage imports it without importing the package's
lazy API, eatt/__init__.py)."""

__version__ = "0.1.0"
