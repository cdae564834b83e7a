"""Which limits apply to a principal: the defaults, replaced by what its roles set."""

from __future__ import annotations

import pytest

from ferryman.auth.principal import Principal, PrincipalKind, acting_as
from ferryman.auth.quotas import Quotas
from ferryman.config import Settings
from ferryman.errors import RateLimitedError
from ferryman.quota_settings import QuotaLimits, QuotaSettings


def test_a_role_replaces_only_what_it_sets_and_the_most_generous_role_wins() -> None:
    settings = Settings.model_validate(
        {
            "quotas": {
                "requests_per_minute": 10,
                "max_running_turns": 2,
                "roles": {
                    "batch": {"max_running_turns": 8},
                    "ops": {"max_running_turns": 4},
                    "admin": {"requests_per_minute": None},
                },
            }
        }
    ).quotas
    assert settings.limits_for(Principal(PrincipalKind.SUBJECT, "u").values("roles")) == QuotaLimits(
        requests_per_minute=10, max_running_turns=2
    )
    both = Principal(PrincipalKind.SUBJECT, "b", {"roles": ("ops", "batch")})
    assert settings.limits_for(both.values("roles")) == QuotaLimits(requests_per_minute=10, max_running_turns=8)
    admin = Principal(PrincipalKind.SUBJECT, "a", {"roles": ("admin",)})
    assert settings.limits_for(admin.values("roles")) == QuotaLimits(requests_per_minute=None, max_running_turns=2)


def test_no_quotas_by_default() -> None:
    assert not Settings().quotas.limits_anything()
    assert QuotaSettings(roles={"x": QuotaLimits(max_running_turns=1)}).limits_anything()


@pytest.mark.anyio
async def test_racing_admissions_of_a_turn_share_its_slot_until_none_goes_on() -> None:
    quotas = Quotas(QuotaSettings(max_running_turns=1))
    with acting_as(Principal(PrincipalKind.SUBJECT, "u")):
        took = await quotas.admit_turn("t1")
        shared = await quotas.admit_turn("t1")  # a racing resume of the same turn shares the slot
        assert took is not None and shared is took
        await quotas.turn_refused("t1", took)  # the one that took it fails (its write found the key held) ...
        with pytest.raises(RateLimitedError):
            await quotas.admit_turn("t2")  # ... but the other goes on: t1 still holds the only slot
        quotas.turn_launched("t1", shared)
        late = await quotas.admit_turn("t1")
        assert late is took
        await quotas.turn_refused("t1", late)  # a late third one failing frees nothing: the turn runs
        with pytest.raises(RateLimitedError):
            await quotas.admit_turn("t2")
        await quotas.turn_ended("t1")  # its run ended
        alone = await quotas.admit_turn("t2")
        assert alone is not None
        await quotas.turn_refused("t2", alone)  # refused with none beside it: freed at once
        assert await quotas.admit_turn("t3") is not None


@pytest.mark.anyio
async def test_a_racer_failing_after_its_turns_run_ended_leaves_the_next_resumes_slot_alone() -> None:
    quotas = Quotas(QuotaSettings(max_running_turns=1))
    with acting_as(Principal(PrincipalKind.SUBJECT, "u")):
        first = await quotas.admit_turn("t1")
        racer = await quotas.admit_turn("t1")  # the keyed repeat, still before its write
        assert first is not None and racer is not None
        quotas.turn_launched("t1", first)
        await quotas.turn_ended("t1")  # the run paused again: its slot is free
        following = await quotas.admit_turn("t1")  # the client's next resume
        assert following is not None and following is not first
        await quotas.turn_refused("t1", racer)  # the repeat's write only now finds the key held
        with pytest.raises(RateLimitedError):
            await quotas.admit_turn("t2")  # the next resume still holds the slot
        quotas.turn_launched("t1", following)
        await quotas.turn_ended("t1")
        assert await quotas.admit_turn("t2") is not None
