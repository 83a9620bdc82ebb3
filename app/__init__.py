"""System1-Omni: the HTTP server for System One decision models (model-neutral)."""
