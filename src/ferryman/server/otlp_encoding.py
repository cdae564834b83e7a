"""Finished spans as the bytes of an OTLP ``ExportTraceServiceRequest``, written straight in protobuf's wire format.

OpenTelemetry's exporter builds a protobuf message object for every span, attribute and value,
and hashes each span's resource (a JSON dump of its attributes) to group them; for the handful of
spans of a turn that costs about as much CPU as making the spans did. This writes the same message
field by field into bytes (nothing is built that is not sent, a resource and a scope are written
once per batch), and yields what the SDK's encoder yields: the tests decode both and compare them.

Field numbers are OTLP's (``opentelemetry/proto/trace/v1/trace.proto``, ``common/v1/common.proto``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_KINDS = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_FIXED64_PACK = struct.Struct("<Q").pack
_FIXED32_PACK = struct.Struct("<I").pack
_DOUBLE_PACK = struct.Struct("<d").pack
_UINT64 = (1 << 64) - 1
_KIND_FIELDS = {kind: bytes((0x30, number)) for kind, number in _KINDS.items()}
_UNSET_STATUS = b"\x7a\x00"  # field 15, empty: no code, no description
_LOCAL_FLAGS = b"\x85\x01" + _FIXED32_PACK(_HAS_IS_REMOTE)
_REMOTE_FLAGS = b"\x85\x01" + _FIXED32_PACK(_HAS_IS_REMOTE | _IS_REMOTE)


def encode_spans(spans: Iterable[ReadableSpan]) -> bytes:
    """The serialized ``ExportTraceServiceRequest`` of ``spans``, grouped by resource, then scope.

    Raises:
        TypeError: An attribute holds a value OTLP has no type for.
    """
    groups: list[tuple[Resource, dict[InstrumentationScope | None, list[bytes]]]] = []
    by_identity: dict[int, dict[InstrumentationScope | None, list[bytes]]] = {}
    for span in spans:
        # A resource's hash is a JSON dump of its attributes: look it up by identity (one object per provider),
        # and compare only a resource not met yet with the few already met.
        resource = span.resource
        scopes = by_identity.get(id(resource))
        if scopes is None:
            scopes = next((met for known, met in groups if known == resource), None)
            if scopes is None:
                scopes = {}
                groups.append((resource, scopes))
            by_identity[id(resource)] = scopes
        scopes.setdefault(span.instrumentation_scope, []).append(_span(span))
    out = bytearray()
    for resource, scopes in groups:
        out += _field(1, _resource_spans(resource, scopes.items()))
    return bytes(out)


def _resource_spans(resource: Resource, scopes: Iterable[tuple[InstrumentationScope | None, list[bytes]]]) -> bytes:
    out = bytearray(_field(1, _attributes(1, resource.attributes)))
    for scope, spans in scopes:
        out += _field(2, _scope_spans(scope, spans))
    if resource.schema_url:
        out += _field(3, resource.schema_url.encode())
    return bytes(out)


def _scope_spans(scope: InstrumentationScope | None, spans: list[bytes]) -> bytes:
    out = bytearray(_field(1, _scope(scope)))
    for span in spans:
        out += _field(2, span)
    if scope is not None and scope.schema_url:
        out += _field(3, scope.schema_url.encode())
    return bytes(out)


def _scope(scope: InstrumentationScope | None) -> bytes:
    if scope is None:
        return b""
    out = bytearray(_text(1, scope.name))
    if scope.version:
        out += _text(2, scope.version)
    out += _attributes(3, scope.attributes)
    return bytes(out)


def _span(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    assert context is not None  # a finished SDK span always has one
    parts = [b"\x0a\x10", context.trace_id.to_bytes(16, "big"), b"\x12\x08", context.span_id.to_bytes(8, "big")]
    if context.trace_state:
        parts.append(_text(3, ",".join(f"{key}={value}" for key, value in context.trace_state.items())))
    parent = span.parent
    if parent is not None:
        parts += (b"\x22\x08", parent.span_id.to_bytes(8, "big"))
    parts += (_name(span.name), _KIND_FIELDS[span.kind])
    if span.start_time:
        parts += (b"\x39", _FIXED64_PACK(span.start_time))
    if span.end_time:
        parts += (b"\x41", _FIXED64_PACK(span.end_time))
    parts.append(_attributes(9, _plain(span)))
    if span.dropped_attributes:
        parts.append(_count(10, span.dropped_attributes))
    events = span.events if getattr(span, "_events", True) else ()  # the SDK's copy made only when there are any
    if events:
        parts += [_field(11, _event(event)) for event in events]
        parts.append(_count(12, span.dropped_events))
    links = span.links if getattr(span, "_links", True) else ()
    if links:
        parts += [_field(13, _link(link)) for link in links]
        parts.append(_count(14, span.dropped_links))
    status = span.status
    code, description = status.status_code.value, status.description
    parts.append(_UNSET_STATUS if not code and not description else _field(15, _status(code, description)))
    parts.append(_REMOTE_FLAGS if parent is not None and parent.is_remote else _LOCAL_FLAGS)
    return b"".join(parts)


def _plain(span: ReadableSpan) -> Mapping[str, Any] | None:
    """The span's attributes: the dict inside the SDK's ``BoundedAttributes`` when it has one (read at C speed)."""
    inner = getattr(getattr(span, "_attributes", None), "_dict", None)
    return inner if type(inner) is dict else span.attributes


_NAMES: dict[str, bytes] = {}
_MAX_NAMES = 1024


def _name(name: str) -> bytes:
    # Span names are route templates, agent and model names: few, met again in every batch.
    found = _NAMES.get(name)
    if found is None:
        if len(_NAMES) >= _MAX_NAMES:
            _NAMES.clear()
        found = _NAMES[name] = _text(5, name)
    return found


def _event(event: Event) -> bytes:
    out = bytearray()
    if event.timestamp:
        out += _tag(1, _FIXED64) + _FIXED64_PACK(event.timestamp)
    out += _text(2, event.name)
    out += _attributes(3, event.attributes)
    out += _count(4, event.dropped_attributes)
    return bytes(out)


def _link(link: Link) -> bytes:
    out = bytearray(_field(1, link.context.trace_id.to_bytes(16, "big")))
    out += _field(2, link.context.span_id.to_bytes(8, "big"))
    out += _attributes(4, link.attributes)
    out += _count(5, link.dropped_attributes)
    out += _tag(6, _FIXED32) + _FIXED32_PACK(_flags(link.context))
    return bytes(out)


def _status(code: int, description: str | None) -> bytes:
    out = _text(2, description) if description else b""
    return out + (_tag(3, _VARINT) + _varint(code) if code else b"")


def _flags(parent: SpanContext | None) -> int:
    return _HAS_IS_REMOTE | _IS_REMOTE if parent is not None and parent.is_remote else _HAS_IS_REMOTE


def _attributes(number: int, attributes: Mapping[str, Any] | None) -> bytes:
    if not attributes:
        return b""
    parts: list[bytes] = []
    for key, value in attributes.items():
        kind = type(value)
        # Keyed by type too: True == 1, but each is written differently. Floats are not kept (0.0 == -0.0).
        if kind is str and len(value) <= _MAX_CACHED_TEXT or kind is int or kind is bool:
            known = (number, key, kind, value)
            written = _PAIRS.get(known)
            if written is None:
                if len(_PAIRS) >= _MAX_PAIRS:
                    _PAIRS.clear()  # ids fill it in a long run; the few common pairs come back at once
                written = _PAIRS[known] = _field(number, _key_value(key, value))
            parts.append(written)
        else:
            parts.append(_field(number, _key_value(key, value)))
    return b"".join(parts)


def _key_value(key: str, value: Any) -> bytes:
    return _text(1, key) + _field(2, _any_value(value))


_MAX_PAIRS = 4096
_MAX_CACHED_TEXT = 256
_PAIRS: dict[tuple[int, str, type, Any], bytes] = {}
"""Encoded attribute fields by field number, key and value: a turn's spans repeat most of theirs
(operation, model, provider), and every span repeats its keys."""


def _any_value(value: Any) -> bytes:
    # A oneof: its member is written even when it holds its type's default (False, 0, "").
    kind = type(value)  # the common types by identity first: isinstance against the ABCs below is slow
    if kind is str:
        return _field(1, value.encode())
    if kind is int:
        return _tag(3, _VARINT) + _varint(value & _UINT64)
    if value is None:
        return b""
    if isinstance(value, bool):
        return _tag(2, _VARINT) + (b"\x01" if value else b"\x00")
    if isinstance(value, str):
        return _field(1, value.encode())
    if isinstance(value, int):
        return _tag(3, _VARINT) + _varint(value & _UINT64)
    if isinstance(value, float):
        return _tag(4, _FIXED64) + _DOUBLE_PACK(value)
    if isinstance(value, bytes):
        return _field(7, value)
    if isinstance(value, Sequence):
        return _field(5, b"".join(_field(1, _any_value(item)) for item in value))
    if isinstance(value, Mapping):
        return _field(6, b"".join(_field(1, _key_value(str(k), v)) for k, v in value.items()))
    raise TypeError(f"no OTLP type for an attribute value of type {type(value).__name__}")


def _count(number: int, count: int) -> bytes:
    return _tag(number, _VARINT) + _varint(count) if count else b""


def _text(number: int, text: str) -> bytes:
    return _field(number, text.encode()) if text else b""


def _field(number: int, payload: bytes | bytearray) -> bytes:
    size = len(payload)
    tag = _LENGTH_TAGS[number] if number < 0x10 else _tag(number, _BYTES)
    return tag + (_ONE_BYTE[size] if size < 0x80 else _varint(size)) + bytes(payload)


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]
_TAGS: dict[tuple[int, int], bytes] = {}
_LENGTH_TAGS = [_ONE_BYTE[number << 3 | _BYTES] for number in range(0x10)]


def _tag(number: int, wire_type: int) -> bytes:
    found = _TAGS.get((number, wire_type))
    if found is None:
        found = _TAGS[(number, wire_type)] = _varint(number << 3 | wire_type)
    return found


def _varint(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
