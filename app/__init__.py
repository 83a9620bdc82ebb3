"""System1-Omni: the HTTP server for System One decision models (model-neutral)."""

__version__ = "0.1.0"  # pyproject.toml's (the image runs the package uninstalled)
