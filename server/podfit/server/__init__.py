"""podfit's scheduling service: cluster cache, scheduling framework, plugins and transports."""
