-- The same tables as SQLite's migrations 1-3 lead to, in PostgreSQL's types.
CREATE TABLE agents (
    id BIGSERIAL PRIMARY KEY,
    agent_id TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE sessions (
    id BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    agent_id TEXT REFERENCES agents(agent_id) ON DELETE CASCADE,
    session_name TEXT NOT NULL,
    started_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX sessions_of_agent ON sessions(agent_id, id);

CREATE TABLE turns (
    id BIGSERIAL PRIMARY KEY,
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
    started_at TIMESTAMPTZ NOT NULL,
    completed_at TIMESTAMPTZ
);
CREATE INDEX turns_of_session ON turns(session_id, id);
-- At most one running turn per session, across every replica.
CREATE UNIQUE INDEX one_running_turn ON turns(session_id) WHERE status = 'in_progress';

CREATE TABLE steps (
    id BIGSERIAL PRIMARY KEY,
    step_id TEXT NOT NULL UNIQUE,
    turn_id TEXT NOT NULL REFERENCES turns(turn_id) ON DELETE CASCADE,
    step_type TEXT NOT NULL,
    pending BOOLEAN NOT NULL DEFAULT FALSE,
    body TEXT NOT NULL
);
CREATE INDEX steps_of_turn ON steps(turn_id, id);

CREATE TABLE messages (
    id BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    turn_id TEXT NOT NULL REFERENCES turns(turn_id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX messages_of_session ON messages(session_id, id);
CREATE INDEX messages_of_turn ON messages(turn_id);

CREATE TABLE models (
    id BIGSERIAL PRIMARY KEY,
    model_id TEXT NOT NULL UNIQUE,
    provider_id TEXT NOT NULL,
    provider_resource_id TEXT NOT NULL,
    model_type TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE conversations (
    id BIGSERIAL PRIMARY KEY,
    conversation_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    metadata TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE responses (
    id BIGSERIAL PRIMARY KEY,
    response_id TEXT NOT NULL UNIQUE,
    turn_id TEXT NOT NULL REFERENCES turns(turn_id) ON DELETE CASCADE,
    session_id TEXT NOT NULL,
    conversation_id TEXT,
    previous_response_id TEXT,
    status TEXT NOT NULL,
    background BOOLEAN NOT NULL DEFAULT FALSE,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX responses_by_previous ON responses(previous_response_id);

CREATE TABLE response_events (
    response_id TEXT NOT NULL REFERENCES responses(response_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (response_id, seq)
);

CREATE TABLE items (
    id BIGSERIAL PRIMARY KEY,
    item_id TEXT NOT NULL,
    owner TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (owner, item_id)
);
CREATE INDEX items_of_owner ON items(owner, id);
