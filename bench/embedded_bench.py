"""Embedded model speed: teachback's provider (litellm + LocalLLM) beside raw llama-cpp-python.

Both load the same GGUF file with the same thread count and decode the same prompts greedily on the
same thread, in the same run, interleaved so that machine load hits both alike. Prints the median generation speed
(completion tokens per second of wall time, prompt processing included) of each path and the ratio
to raw llama-cpp-python. teachback also returns every sampled token's logprob; raw here does not.

    .venv/bin/python bench/embedded_bench.py [--rounds N] [--max-tokens N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

PROMPTS = (
    "Write a Python function that checks whether a number is prime.",
    "Explain what a git commit is in three sentences.",
    "List five common HTTP status codes and what they mean.",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()

    from llama_cpp import Llama

    from agent.llm import load_litellm

    litellm = load_litellm()  # before the provider module: it imports litellm offline
    from agent.providers.llama_engine import DEFAULT_CONTEXT, load_engine, model_path

    path = str(model_path("smollm2"))
    engine = load_engine(path)
    threads = engine.llm.n_threads  # what the provider uses
    raw = Llama(model_path=path, n_ctx=DEFAULT_CONTEXT, n_threads=threads, n_threads_batch=threads, verbose=False)

    def run_raw(messages: list[dict]) -> int:
        # On the provider's worker thread too: llama.cpp threads started from two threads of one
        # process slow each other down, which would handicap whichever path ran second.
        out = engine.worker.submit(
            raw.create_chat_completion, messages=messages, max_tokens=args.max_tokens, temperature=0.0
        ).result()
        return out["usage"]["completion_tokens"]

    def run_litellm(messages: list[dict]) -> int:
        out = litellm.completion(model="local/smollm2", messages=messages, max_tokens=args.max_tokens, temperature=0.0)
        return out.usage.completion_tokens

    def run_stream(messages: list[dict]) -> int:
        async def consume() -> int:
            stream = await litellm.acompletion(
                model="local/smollm2",
                messages=messages,
                max_tokens=args.max_tokens,
                temperature=0.0,
                stream=True,
                stream_options={"include_usage": True},
            )
            usage = None
            async for chunk in stream:
                usage = getattr(chunk, "usage", None) or usage
            return usage.completion_tokens

        return asyncio.run(consume())

    paths = {"raw llama-cpp-python": run_raw, "teachback completion": run_litellm, "teachback async stream": run_stream}
    for run in paths.values():  # warm-up: first-call costs (litellm set-up, allocations)
        run([{"role": "user", "content": "Hi"}])
    speeds: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(args.rounds):
        for prompt in PROMPTS:
            messages = [{"role": "user", "content": prompt}]
            for name, run in paths.items():
                started = time.perf_counter()
                tokens = run(messages)
                speeds[name].append(tokens / (time.perf_counter() - started))

    baseline = statistics.median(speeds["raw llama-cpp-python"])
    print(
        f"SmolLM2-135M-Instruct Q4_1, {threads} threads, {args.rounds} rounds x {len(PROMPTS)} prompts, "
        f"max {args.max_tokens} tokens, greedy"
    )
    for name, values in speeds.items():
        median = statistics.median(values)
        print(f"{name:24s} median {median:7.1f} tokens/s   ratio to raw {median / baseline:5.2f}")


if __name__ == "__main__":
    main()
