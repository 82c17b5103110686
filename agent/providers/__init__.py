"""teachback's own litellm providers: `scripted/...` and the embedded `local/...`.

Both modules subclass litellm's CustomLLM, so importing them imports litellm: the offline
environment must be in place first, or litellm fetches its cost map from the network at import.
"""

from agent.litellm_env import offline_environment

offline_environment()


class ProviderSetupError(Exception):
    """One of our providers cannot run as configured (a missing model file, a bad script): the
    message says how to fix it, and retrying cannot help."""
