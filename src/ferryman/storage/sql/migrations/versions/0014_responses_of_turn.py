"""A turn's response is found by the turn's id through an index, not a scan of every response.

A turn waiting behind a run on another replica reads its response once a second (``turn_response``), and
deleting a turn or failing turns whose lease ended reads the responses of those turns: each looked
``responses.turn_id`` up without an index. ``responses_of_turn`` indexes it (the session is then checked on
the one row found).

Revision ID: 0014_responses_of_turn
Revises: 0013_live_turns
"""

from __future__ import annotations

from alembic import op

revision = "0014_responses_of_turn"
down_revision = "0013_live_turns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Index the responses by the turn they run as."""
    op.create_index("responses_of_turn", "responses", ["turn_id"])


def downgrade() -> None:
    """Drop the index of responses by turn."""
    op.drop_index("responses_of_turn", table_name="responses")
