"""The one place litellm is imported: offline set-up, our custom providers, and what litellm's
errors mean (which are final, and what to tell the person).

litellm takes seconds to import, so nothing imports it at module level; call `load_litellm()`
when a model call is about to happen.
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
from types import ModuleType

from agent.litellm_env import offline_environment
from agent.providers import ProviderSetupError

log = logging.getLogger(__name__)

# provider prefix -> "module:attribute" of a litellm CustomLLM subclass (instantiated once).
CUSTOM_PROVIDERS = {
    "scripted": "agent.providers.scripted:ScriptedLLM",
    "local": "agent.providers.local:LocalLLM",
}


def _one_line(record: logging.LogRecord) -> bool:
    """litellm logs its own internal failures (usage logging, cost maps) with tracebacks; the user
    gets the one line, and the traceback only with teachback -v (debug logging)."""
    if record.exc_info and not logging.getLogger().isEnabledFor(logging.DEBUG):
        record.exc_info, record.exc_text = None, None
    return True


@functools.cache
def load_litellm() -> ModuleType:
    offline_environment()
    import litellm

    litellm.suppress_debug_info = True
    litellm.telemetry = False
    logging.getLogger("LiteLLM").addFilter(_one_line)
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


# -- model errors: which are final, and what to tell the person ------------------------------------

MODEL_HELP = "https://docs.litellm.ai/docs/providers"


class ModelError(Exception):
    """The model could not answer: `kind` is setup (one of teachback's own providers is not set up),
    auth (a key missing or refused), not_found (a model litellm cannot route, or the provider does
    not know), context_window, bad_request (the server refused the request) or unavailable
    (transient failures that outlasted the retries)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def check_model(litellm: ModuleType, model: str, api_base: str | None) -> None:
    """Fail before any request when litellm cannot route `model` (it needs a provider prefix)."""
    try:
        litellm.get_llm_provider(model=model, api_base=api_base)
    except (litellm.BadRequestError, ValueError) as exc:
        raise ModelError(
            f"Model {model} is not a model string litellm can route: it names no provider litellm knows.\n"
            "Name the provider first, e.g. anthropic/claude-sonnet-4-5, openai/gpt-4o, ollama/llama3, or "
            f"openai/NAME or hosted_vllm/NAME with api_base for a local server ({MODEL_HELP}).",
            "not_found",
        ) from exc


# Model errors that no retry or later turn can fix: the model name, its key, or its provider set-up.
MODEL_USAGE_ERRORS = ("setup", "auth", "not_found")


def classify(litellm: ModuleType, exc: Exception, model: str, api_base: str | None) -> str | None:
    """The ModelError kind of a failed call; None for an exception that is not a model failure."""
    if _setup_error(exc) is not None:
        return "setup"
    chain = _chain(exc)
    connection = tuple(getattr(litellm, n) for n in ("APIConnectionError", "Timeout") if hasattr(litellm, n))
    answered = any(type(e).__name__ == "HTTPStatusError" for e in chain)  # httpx: a server's HTTP answer
    if not answered and not isinstance(exc, connection) and missing_keys(litellm, model, api_base):
        return "auth"  # refused on this machine before any request, e.g. openai's "Missing credentials"
    permanent = (
        ("ContextWindowExceededError", "context_window"),
        ("AuthenticationError", "auth"),
        ("PermissionDeniedError", "auth"),
        ("NotFoundError", "not_found"),
        ("BadRequestError", "bad_request"),
        ("UnprocessableEntityError", "bad_request"),
    )
    for name, kind in permanent:
        if isinstance(exc, getattr(litellm, name, ())):
            return kind
    transient = tuple(
        getattr(litellm, name)
        for name in (
            "RateLimitError",
            "APIConnectionError",
            "Timeout",
            "InternalServerError",
            "ServiceUnavailableError",
            "BadGatewayError",
            "APIError",
        )
        if hasattr(litellm, name)
    )
    if isinstance(exc, transient) or isinstance(exc, (ConnectionError, TimeoutError)):
        return "unavailable"
    return None


def missing_keys(litellm: ModuleType, model: str, api_base: str | None) -> list[str]:
    """The credential variables litellm wants for `model` and does not find in the environment."""
    if model.split("/", 1)[0] in CUSTOM_PROVIDERS:
        return []
    try:
        found = litellm.validate_environment(model=model, api_base=api_base)
    except Exception as exc:  # litellm's checks raise whatever a provider module raises
        log.debug("validate_environment(%s) failed: %s", model, exc)
        return []
    secrets = ("KEY", "TOKEN", "SECRET", "PASSWORD")
    return [k for k in found.get("missing_keys") or [] if any(s in k.upper() for s in secrets)]


def describe(litellm: ModuleType, model: str, kind: str, exc: Exception, *, mode: str, api_base: str | None) -> str:
    """What failed, in the server's words, and what to change."""
    setup = _setup_error(exc)
    if setup is not None:
        return f"Model {model} cannot run: {setup}"
    text = server_message(exc)[:500]
    where = f"The server at {api_base}" if api_base else "The provider"
    status = getattr(exc, "status_code", None)
    if kind == "auth":
        return _auth_advice(litellm, model, api_base, text)
    if kind == "bad_request":
        http = f" (HTTP {status})" if status else ""
        return (
            f"Model {model} failed (bad_request): {where} refused the request{http}: {text}\n"
            f"{_refusal_advice(text, mode)} teachback did not retry: the same request would be refused again."
        )
    if kind == "unavailable" and status:
        return (
            f"Model {model} failed (unavailable): {where} answered HTTP {status} to every attempt: {text}\n"
            "It may be overloaded or failing; try again later, or check api_base and the server's log."
        )
    advice = {
        "not_found": "Check the model name: it must be a litellm model string such as anthropic/claude-sonnet-4-5.",
        "context_window": "The conversation no longer fits the model's context window; start a new session.",
        "unavailable": "The provider could not be reached after retries; check the network or api_base.",
    }[kind]
    return f"Model {model} failed ({kind}): {text}\n{advice}"


def _auth_advice(litellm: ModuleType, model: str, api_base: str | None, text: str) -> str:
    missing = missing_keys(litellm, model, api_base)
    if not missing:
        return (
            f"Model {model} failed (auth): {text}\nThe provider refused the API key: check the key in its "
            "environment variable (e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY) and that it may use this model."
        )
    return missing_key_advice(model, missing, api_base)


def missing_key_advice(model: str, missing: list[str], api_base: str | None) -> str:
    local = f" A local server that checks no key takes any value ({missing[0]}=none)." if api_base else ""
    return (
        f"Model {model} needs its API key in {' or '.join(missing)}, which is not set. Set it "
        f"(export {missing[0]}=...) and run again.{local}"
    )


def _refusal_advice(text: str, mode: str) -> str:
    lowered = text.lower()
    if mode in ("grammar", "json_object") and any(w in lowered for w in ("response_format", "json_schema", "grammar")):
        other = (
            'tool_mode = "json_object" (the {"type": "json_object", "schema": ...} form llama-cpp-python\'s '
            'server takes) or tool_mode = "text"'
            if mode == "grammar"
            else 'tool_mode = "text"'
        )
        return (
            f'This server does not take the response_format that tool_mode "{mode}" sends: set {other} '
            "in teachback.toml (or TEACHBACK_TOOL_MODE)."
        )
    if mode == "native" and "tool" in lowered:
        return (
            'This server does not take native tool calls: set tool_mode = "grammar" or tool_mode = "text" in '
            "teachback.toml (or TEACHBACK_TOOL_MODE)."
        )
    return "Check the model name, api_base and the settings sent with the request (max_tokens, temperature)."


def server_message(exc: BaseException) -> str:
    """The provider's own words, without litellm's class-name prefixes and appended traceback."""
    text = str(exc).split(" Traceback (most recent call last)")[0].strip()
    while True:
        shorter = _PREFIX.sub("", text, count=1)
        if shorter == text:
            return " ".join(text.split())
        text = shorter


_PREFIX = re.compile(r"^(?:litellm\.)?\w+(?:Error|Exception)(?::| -) ")


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and everything it wraps (litellm keeps the original on `original_exception`)."""
    seen: list[BaseException] = []
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        stack += [getattr(current, "original_exception", None), current.__cause__, current.__context__]
    return seen


def _setup_error(exc: BaseException) -> Exception | None:
    """Our own provider's configuration error, wherever litellm's wrapping put it."""
    return next((e for e in _chain(exc) if isinstance(e, ProviderSetupError)), None)
