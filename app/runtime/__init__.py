"""The runtime: model slots, the admission queue and the one executor thread that owns sessions."""
