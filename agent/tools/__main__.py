"""`python -m agent.tools`: write the built-in tools' declared roles to agent/protocol's
builtin_roles.json, which a call recorded before calls carried roles falls back to (the store may
import only the protocol, so it cannot read the declarations themselves)."""

from __future__ import annotations

from agent.tools import builtin_roles_json, builtin_roles_path

if __name__ == "__main__":
    builtin_roles_path().write_text(builtin_roles_json(), encoding="utf-8")
