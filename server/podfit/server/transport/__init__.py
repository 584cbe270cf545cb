"""Wire formats (gRPC, the extender's HTTP/JSON) to and from the scheduling service; no scheduling logic."""
