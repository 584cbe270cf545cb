"""Keeps gRPC's C-core log lines ("I1124 ... Handshake failed ...") off the CLI's and SDK users' stderr.

The core reads GRPC_VERBOSITY once, when grpc is first imported, so this module is imported before grpc
(first thing in podfit.client). Errors still show; GRPC_VERBOSITY set in the environment wins.
"""

import os

os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
