"""podfit's scheduling service: cluster cache, scheduling framework, plugins and transports."""

import os

# gRPC's C core reads this once, when grpc is first imported (podfit.server is imported before it):
# without it, core log lines (a failed bind, a bad certificate) land on stderr beside podfit's own
# messages. Errors still show; GRPC_VERBOSITY=debug in the environment overrides this.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
