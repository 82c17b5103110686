"""Hooks in Claude Code's format that teachback runs around its own tool calls and turns: where they
are defined and which run (config), running one (command), what its answer means (verdicts), and
the hooks of one session (runner)."""
