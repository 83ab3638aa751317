"""``compression-bench mcp``: the engine for an agent (``benchmarks.agents.mcp_server``)."""

from __future__ import annotations

import os

from benchmarks.agents.mcp_server import TOKEN_ENV, Engine, build_server
from benchmarks.store.database import default_store_path


def cmd_mcp(args) -> int:
    """Serve on stdio until the client closes; refused in one line without the ``mcp`` SDK
    or without the owner's token."""
    try:
        import mcp  # noqa: F401 (optional: only this command needs it)
    except ImportError:
        raise ValueError("compression-bench mcp needs the mcp SDK: pip install mcp "
                         "(requirements.txt pins its version)") from None
    engine = Engine(args.store or default_store_path(), os.environ.get(TOKEN_ENV, ""))
    build_server(engine).run()
    return 0
