"""Agents: the engine over the Model Context Protocol (``mcp_server``)."""
