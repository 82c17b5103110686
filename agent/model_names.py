"""What is known of a model before it runs. Whether a model string can start a session, checked before anything is recorded: a typo'd name
gets "did you mean …?" rather than a complaint about an API key it would never have used, and a
missing key is said before the first request rather than after the session has begun. And its
context window, for the fill an agent panel shows."""

from __future__ import annotations

import difflib
import logging
from types import ModuleType
from typing import TYPE_CHECKING

from agent.llm import CUSTOM_PROVIDERS, MODEL_HELP, missing_key_advice, missing_keys

if TYPE_CHECKING:
    from agent.config import Settings

log = logging.getLogger(__name__)

# Providers whose every model litellm lists, so a name it does not know there is most likely a typo.
# Servers that take any name (ollama, hosted_vllm, openai with an api_base, ...) are not checked.
CATALOGUE_PROVIDERS = ("anthropic", "openai", "gemini", "mistral", "xai", "deepseek", "groq", "cohere")


def start_problem(litellm: ModuleType, model: str, api_base: str | None) -> str | None:
    """Why `model` cannot start, in words that say how to fix it; None when it may run."""
    provider, _, name = model.partition("/")
    if provider in CUSTOM_PROVIDERS and name:
        return _own_provider_problem(provider, name)
    if not name and (unrouted := _unrouted(litellm, model, api_base)) is not None:
        return unrouted
    if name and api_base is None and provider in CATALOGUE_PROVIDERS:
        known = set(_listed(litellm, provider))
        if known and name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
            if close:
                return (
                    f"Model {model} is not one litellm {_version(litellm)} knows for {provider}: did you mean "
                    f"{' or '.join(f'{provider}/{c}' for c in close)}? (A model newer than litellm needs a newer "
                    "litellm: pip install -U litellm.)"
                )
    missing = missing_keys(litellm, model, api_base)
    return missing_key_advice(model, missing, api_base) if missing else None


def _own_provider_problem(provider: str, name: str) -> str | None:
    from agent.providers import ProviderSetupError

    try:
        if provider == "local":
            from agent.providers.llama_engine import check_runtime

            check_runtime(name)
        else:
            from agent.providers.scripted import load_script

            load_script(name)
    except ProviderSetupError as exc:
        return f"Model {provider}/{name} cannot run: {exc}"
    return None


def _unrouted(litellm: ModuleType, model: str, api_base: str | None) -> str | None:
    """A name without a provider: litellm routes some (gpt-4o); for the rest, the closest full names."""
    try:
        litellm.get_llm_provider(model=model, api_base=api_base)
        return None
    except (litellm.BadRequestError, ValueError):
        pass  # said below, with the names it may have meant
    from agent.providers.llama_engine import PACKAGED_MODELS

    ours = {packaged: f"local/{packaged}" for packaged in PACKAGED_MODELS}
    if model in ours:
        close = [ours[model]]
    else:
        known = {name: f"{provider}/{name}" for provider in CATALOGUE_PROVIDERS for name in _listed(litellm, provider)}
        known.update(ours)
        close = [known[c] for c in difflib.get_close_matches(model, sorted(known), n=3, cutoff=0.6)]
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    return (
        f"Model {model} names no provider litellm knows.{hint} A model string names its provider first, e.g. "
        f"anthropic/claude-sonnet-4-5, openai/gpt-4o, ollama/llama3 or local/smollm2 ({MODEL_HELP})."
    )


def _listed(litellm: ModuleType, provider: str) -> list[str]:
    return [name.removeprefix(f"{provider}/") for name in litellm.models_by_provider.get(provider) or ()]


def _version(litellm: ModuleType) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("litellm")
    except PackageNotFoundError:
        return getattr(litellm, "__version__", "")


def context_window(settings: Settings) -> int:
    """The model's context window: the configured `context_size`, else litellm's model table, else the
    context the embedded model loads; 0 when none knows it (the editor then gets no usage_update)."""
    from agent.llm import load_litellm

    if settings.context_size:
        return settings.context_size
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(settings.model)
    except Exception as exc:  # litellm raises a bare Exception for a model it does not list
        log.debug("no context window known for %s: %s", settings.model, exc)
        info = {}
    known = int(info.get("max_input_tokens") or info.get("max_tokens") or 0)
    if known or not settings.model.startswith("local/"):
        return known
    from agent.providers.llama_engine import DEFAULT_CONTEXT

    return DEFAULT_CONTEXT
