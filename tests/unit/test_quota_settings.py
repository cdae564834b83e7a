"""Which limits apply to a principal: the defaults, replaced by what its roles set."""

from __future__ import annotations

from ferryman.auth.principal import Principal
from ferryman.auth.quotas import QuotaLimits, QuotaSettings
from ferryman.config import Settings


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
    assert settings.limits_for(Principal("u")) == QuotaLimits(requests_per_minute=10, max_running_turns=2)
    both = Principal("b", {"roles": ("ops", "batch")})
    assert settings.limits_for(both) == QuotaLimits(requests_per_minute=10, max_running_turns=8)
    admin = Principal("a", {"roles": ("admin",)})
    assert settings.limits_for(admin) == QuotaLimits(requests_per_minute=None, max_running_turns=2)


def test_no_quotas_by_default() -> None:
    assert not Settings().quotas.limits_anything()
    assert QuotaSettings(roles={"x": QuotaLimits(max_running_turns=1)}).limits_anything()
