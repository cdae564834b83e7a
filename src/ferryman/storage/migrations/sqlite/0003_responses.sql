-- migrate: foreign_keys=off
-- Responses and conversations run on the same turns; their sessions belong to no agent,
-- so sessions.agent_id becomes nullable (SQLite needs a table rebuild for that).
CREATE TABLE sessions_new (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    agent_id TEXT REFERENCES agents(agent_id) ON DELETE CASCADE,
    session_name TEXT NOT NULL,
    started_at TEXT NOT NULL
);
INSERT INTO sessions_new (id, session_id, agent_id, session_name, started_at)
    SELECT id, session_id, agent_id, session_name, started_at FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE INDEX sessions_of_agent ON sessions(agent_id, id);

CREATE TABLE turns_new (
    id INTEGER PRIMARY KEY,
    turn_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    agent_id TEXT,
    status TEXT NOT NULL,
    input_messages TEXT NOT NULL,
    output_message TEXT,
    overrides TEXT NOT NULL,
    infer_iters INTEGER NOT NULL DEFAULT 0,
    error_code TEXT,
    error_message TEXT,
    started_at TEXT NOT NULL,
    completed_at TEXT
);
INSERT INTO turns_new SELECT * FROM turns;
DROP TABLE turns;
ALTER TABLE turns_new RENAME TO turns;
CREATE INDEX turns_of_session ON turns(session_id, id);
CREATE UNIQUE INDEX one_running_turn ON turns(session_id) WHERE status = 'in_progress';

CREATE TABLE conversations (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    metadata TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

CREATE TABLE responses (
    id INTEGER PRIMARY KEY,
    response_id TEXT NOT NULL UNIQUE,
    turn_id TEXT NOT NULL REFERENCES turns(turn_id) ON DELETE CASCADE,
    session_id TEXT NOT NULL,
    conversation_id TEXT,
    previous_response_id TEXT,
    status TEXT NOT NULL,
    background INTEGER NOT NULL DEFAULT 0,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX responses_by_previous ON responses(previous_response_id);

CREATE TABLE response_events (
    response_id TEXT NOT NULL REFERENCES responses(response_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (response_id, seq)
);

-- Items in OpenAI form: a conversation's items, or a response's input items (owner = its id).
CREATE TABLE items (
    id INTEGER PRIMARY KEY,
    item_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (owner, item_id)
);
CREATE INDEX items_of_owner ON items(owner, id);
