"""Generated from protos/podfit/k8s/v1; never edit by hand."""
