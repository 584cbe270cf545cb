"""Dynamic resource allocation with structured parameters: CEL device selectors and the allocator
(upstream k8s.io/dynamic-resource-allocation), which the DynamicResources plugin drives."""
