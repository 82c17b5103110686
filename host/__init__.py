"""Hosting a recorded session: what the doors (language server, ACP agent, terminal app), the
command line and the rollouts share. `host.session.open_recorded` opens a session with its store,
recorder and lessons, and its `close()` closes them; `host.worker` is the worker process a door runs
its session in, and the spare one started ahead of it."""
