"""Kubernetes object handling shared by the SDK and the server: quantities, selectors, manifests."""
