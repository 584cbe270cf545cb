"""What-if questions over overlays of the cache (cluster-autoscaler's estimator, simulation)."""
