"""Extracting tags for many files at once: in this process, or in worker processes when a cold
scan has enough files to repay starting them."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from collections.abc import Iterator, Sequence

from agent.repomap.files import readable_source
from agent.repomap.tags import EMPTY_TAGS, FileTags, Tagger

log = logging.getLogger(__name__)

PARALLEL_MIN_FILES = 200
MAX_WORKERS = 8
_CHUNK = 16

Job = tuple[str, bytes]  # (language, content)


def default_workers(jobs: int) -> int:
    """How many processes to parse `jobs` files with (1: in this process): one per idle core,
    when there are enough files to repay starting them."""
    if jobs < PARALLEL_MIN_FILES:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    busy = round(os.getloadavg()[0]) if hasattr(os, "getloadavg") else 0
    idle = cores - busy
    return min(idle, MAX_WORKERS) if idle >= 2 else 1


def extract_one(tagger: Tagger, language: str, data: bytes) -> FileTags:
    """Tags of one file's content; none for binary, oversized, generated or minified content."""
    return tagger.extract(language, data) if readable_source(data) else EMPTY_TAGS


def extract_many(jobs: Sequence[Job], *, workers: int = 1) -> Iterator[tuple[FileTags, str]]:
    """(tags, tags as JSON) for each job, in order."""
    done = 0
    if workers > 1:
        # Imported here: a warm map, whose tags are all cached, starts no processes.
        from concurrent.futures.process import BrokenProcessPool

        try:
            for result in _in_pool(jobs, workers):
                yield result
                done += 1
            return
        except (OSError, BrokenProcessPool) as exc:
            log.warning("parallel parsing failed (%s); parsing the rest in this process", exc)
    tagger = Tagger()
    with paused_gc():
        for language, data in jobs[done:]:
            tags = extract_one(tagger, language, data)
            yield tags, tags.to_json()


def _in_pool(jobs: Sequence[Job], workers: int) -> Iterator[tuple[FileTags, str]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        chunks = [jobs[i : i + _CHUNK] for i in range(0, len(jobs), _CHUNK)]
        with paused_gc():
            for texts in pool.map(_extract_chunk, chunks):
                for text in texts:
                    yield FileTags.from_json(text), text


def _extract_chunk(jobs: Sequence[Job]) -> list[str]:
    tagger = Tagger()
    with paused_gc():
        return [extract_one(tagger, language, data).to_json() for language, data in jobs]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Suspend the cycle collector during a bulk parse: it allocates hundreds of thousands of
    small acyclic objects, and collections triggered by them cost a tenth of the time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
