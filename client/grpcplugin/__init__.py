"""Generated from protos/grpcplugin; never edit by hand."""
