"""The in-memory cluster cache: objects, per-node aggregates, generations and snapshots."""
