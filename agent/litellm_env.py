"""litellm's offline set-up, shared by the place litellm is loaded (agent.llm) and our providers
(agent.providers), which subclass litellm's classes and so import it themselves."""

from __future__ import annotations

import os

# Offline and quiet: the cost map comes from the copy inside the litellm package (no fetch at
# import), and litellm's telemetry/banners stay off.
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "LITELLM_LOG": "ERROR",
}


def offline_environment() -> None:
    """Set litellm's offline variables (where the user has not) before anything imports it."""
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
