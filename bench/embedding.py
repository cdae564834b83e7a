"""The local embedding model's throughput (``python -m bench --knowledge``), and the most this machine allows it.

all-MiniLM-L6-v2 runs in float32 numpy: almost all of its work is matrix
products, so its texts/s is bounded by how fast this machine's BLAS multiplies
float32 matrices. Beside the model's own rate, the bench measures that bound on
the same threads the encoder uses (one BLAS thread per worker, every worker at
once), counts the model's floating-point operations for the texts it encoded,
and reports what share of the bound it reached and the rate the bound allows.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from ferryman.inference import minilm

from .knowledge_data import embedding_texts, retrieval_passages
from .stats import Figure, figure

GROUP = "knowledge"
MODEL = "local all-MiniLM-L6-v2"
LAYERS, WIDTH, HIDDEN = 6, 384, 1536
PRODUCT_ROWS = 2048
"""Rows of the peak's products: a batch of the encoder's size (``_BATCH_TOKENS``) times its feed-forward layer."""
PEAK_SECONDS = 2.0


def flops(token_counts: list[int]) -> float:
    """The model's floating-point operations (a multiply and an add are two) encoding texts of these lengths.

    Per token and layer: the query, key and value projections (384 x 1152), the attention's output (384 x 384)
    and the feed-forward layer (384 x 1536 twice); per text and layer, the attention's two products over its
    tokens (n x n x 384 each). Padding, the softmax, GELU and layer norms are left out: a lower bound.
    """
    per_token = 2 * (WIDTH * 3 * WIDTH + WIDTH * WIDTH + 2 * WIDTH * HIDDEN)
    return float(sum(LAYERS * (n * per_token + 2 * 2 * n * n * WIDTH) for n in token_counts))


def blas_peak(workers: int, seconds: float = PEAK_SECONDS) -> float:
    """GFLOP/s of float32 products of the encoder's shapes, on ``workers`` threads at once, BLAS on one each."""
    left = np.random.default_rng(0).standard_normal((PRODUCT_ROWS, WIDTH), dtype=np.float32)
    right = np.random.default_rng(1).standard_normal((WIDTH, HIDDEN), dtype=np.float32)
    one = 2.0 * PRODUCT_ROWS * WIDTH * HIDDEN
    done: list[int] = []
    counting = threading.Lock()
    start = threading.Barrier(workers)

    def multiply() -> None:
        out = np.empty((PRODUCT_ROWS, HIDDEN), dtype=np.float32)
        np.matmul(left, right, out=out)  # warm
        start.wait()
        ends, count = time.perf_counter() + seconds, 0
        while time.perf_counter() < ends:
            np.matmul(left, right, out=out)
            count += 1
        with counting:
            done.append(count)

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
        for running in [pool.submit(multiply) for _ in range(workers)]:
            running.result()
    return sum(done) * one / seconds / 1e9


def _throughput(name: str, label: str, texts: list[str], repeats: int, encoder: Any) -> tuple[Figure, float]:
    """The encoder's texts/s over ``repeats`` runs, and its best run's seconds."""
    rates, best = [], float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        encoder.encode(texts)
        spent = time.perf_counter() - began
        rates.append(len(texts) / spent)
        best = min(best, spent)
    return figure(name, label, "texts/s", rates, 0, GROUP), best


def embedding_figures(texts: int, repeats: int) -> list[Figure]:
    """The model's texts/s on ``texts`` synthetic passages and on the retrieval set, and its bound."""
    encoder = minilm.MiniLM()
    synthetic = embedding_texts(texts)
    encoder.encode(synthetic[:4])  # warm: the first call allocates
    english = retrieval_passages(texts if texts < 64 else None)
    name = "knowledge.embed.local_minilm"
    rate, best = _throughput(name, f"{MODEL}, {len(synthetic)} synthetic passages of 50-70 words (fixed)", synthetic,
                             repeats, encoder)  # fmt: skip
    english_rate, _ = _throughput(f"{name}.retrieval_set", f"{MODEL}, the retrieval set's {len(english)} English "
                                  "passages", english, 1, encoder)  # fmt: skip
    work = flops([len(ids) for ids in encoder.token_ids(synthetic)])
    workers = minilm.WORKERS
    peak = blas_peak(workers)
    reached = work / best / 1e9
    return [
        rate,
        english_rate,
        figure(f"{name}.gflops", "the synthetic passages' products, best run", "GFLOP/s", [reached], 0, GROUP),
        figure(
            f"{name}.blas_peak",
            f"float32 products of its shapes on {workers} threads, BLAS on one each",
            "GFLOP/s",
            [peak],
            0,
            GROUP,
        ),  # fmt: skip
        figure(f"{name}.share_of_peak", "the model's products against that peak", "share", [reached / peak], 0, GROUP),
        figure(
            f"{name}.ceiling",
            "texts/s at that peak, with no other work (float32)",
            "texts/s",
            [peak * 1e9 / (work / len(synthetic))],
            0,
            GROUP,
        ),  # fmt: skip
    ]
