"""Generated from protos/podfit/v1; never edit by hand."""
