"""Fresh ids: version 4 UUIDs, in their usual text alone or as hex digits after a prefix."""

from __future__ import annotations

import re
import uuid

from ferryman.ids import new_hex, new_id

HEX_32 = re.compile(r"^[0-9a-f]{32}$")


def test_a_bare_id_is_a_version_4_uuid_in_its_usual_text() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for value in ids:
        parsed = uuid.UUID(value)
        assert str(parsed) == value
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_a_prefixed_id_is_the_prefix_and_a_version_4_uuid_s_hex_digits() -> None:
    ids = [new_id("turn") for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for value in ids:
        prefix, _, digits = value.partition("_")
        assert prefix == "turn" and HEX_32.match(digits)
        parsed = uuid.UUID(hex=digits)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    # The version and variant bits are fixed; every other bit varies.
    seen_ones = 0
    for value in ids:
        seen_ones |= int(value.partition("_")[2], 16)
    fixed = {(127 - 48) - b for b in range(4)} | {(127 - 64) - b for b in range(2)}
    assert all(seen_ones >> bit & 1 for bit in range(128) if bit not in fixed)


def test_bare_hex_is_a_version_4_uuid_s_digits_as_uuid4_hex_writes_them() -> None:
    values = [new_hex() for _ in range(500)]
    assert len(set(values)) == len(values)
    for value in values:
        assert HEX_32.match(value)
        parsed = uuid.UUID(hex=value)
        assert parsed.hex == value and parsed.version == 4 and parsed.variant == uuid.RFC_4122
