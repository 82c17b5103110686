"""Tools from Model Context Protocol servers, offered to the model as mcp__<server>__<tool>.

config: which servers a session starts (teachback.toml tables, a workspace's .mcp.json once
allowed); trust: the workspaces the user allowed; servers: a session's servers and their calls;
tools: a server tool as a model tool; connection: one server over the `mcp` library (imported only
when a session starts its servers); cli and doctor: `teachback mcp` and doctor's lines."""
