-- The SSE events of each Agents API turn, numbered across its pauses, for replay by Last-Event-ID.
CREATE TABLE turn_events (
    turn_id TEXT NOT NULL REFERENCES turns(turn_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
);
