"""The ``quotas:`` section of the settings: each principal's requests per minute and running turns."""

from __future__ import annotations

from pydantic import BaseModel, Field


class QuotaLimits(BaseModel):
    """Limits of one principal; None: unlimited."""

    requests_per_minute: int | None = Field(default=None, gt=0)
    max_running_turns: int | None = Field(default=None, gt=0)


class QuotaSettings(QuotaLimits):
    """``quotas:`` in the config file: the limits of every principal, and per-role overrides.

    A field a role sets replaces the default for principals with that role (an
    explicit ``null`` lifts the limit); a principal with several such roles gets
    the most generous of their values.
    """

    roles: dict[str, QuotaLimits] = Field(default_factory=dict)

    def limits_for(self, roles: tuple[str, ...]) -> QuotaLimits:
        """The limits that apply to a principal with ``roles`` (its values of the ``roles`` attribute)."""
        overrides = [self.roles[role] for role in roles if role in self.roles]
        return QuotaLimits(
            requests_per_minute=_most_generous(self, overrides, "requests_per_minute"),
            max_running_turns=_most_generous(self, overrides, "max_running_turns"),
        )

    def limits_anything(self) -> bool:
        """Whether any principal has any limit."""
        every = [self, *self.roles.values()]
        return any(limits.requests_per_minute or limits.max_running_turns for limits in every)


def _most_generous(default: QuotaLimits, overrides: list[QuotaLimits], name: str) -> int | None:
    values: list[int | None] = [getattr(o, name) for o in overrides if name in o.model_fields_set]
    if not values:
        return getattr(default, name)  # type: ignore[no-any-return]
    return None if None in values else max(v for v in values if v is not None)
