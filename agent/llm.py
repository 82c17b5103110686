"""The one place litellm is imported: offline set-up and our custom providers.

litellm takes seconds to import, so nothing imports it at module level; call `load_litellm()`
when a model call is about to happen.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from types import ModuleType

log = logging.getLogger(__name__)

# provider prefix -> "module:attribute" of a litellm CustomLLM subclass (instantiated once).
CUSTOM_PROVIDERS = {
    "scripted": "agent.providers.scripted:ScriptedLLM",
    "local": "agent.providers.local:LocalLLM",
}

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


@functools.cache
def load_litellm() -> ModuleType:
    offline_environment()
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    handlers = []
    for provider, target in CUSTOM_PROVIDERS.items():
        module_name, attr = target.split(":")
        try:
            handler_cls = getattr(importlib.import_module(module_name), attr)
        except ImportError as exc:  # an optional provider whose module is absent
            log.debug("provider %s unavailable: %s", provider, exc)
            continue
        handlers.append({"provider": provider, "custom_handler": handler_cls()})
    litellm.custom_provider_map = [*litellm.custom_provider_map, *handlers]
    litellm.utils.custom_llm_setup()
    return litellm
