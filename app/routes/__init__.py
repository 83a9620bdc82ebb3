"""HTTP handlers: decisions, health, discovery."""
