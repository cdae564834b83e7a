-- Agents, sessions, turns, steps and the message history turns build.
CREATE TABLE agents (
    id INTEGER PRIMARY KEY,
    agent_id TEXT NOT NULL UNIQUE,
    config TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    agent_id TEXT NOT NULL REFERENCES agents(agent_id) ON DELETE CASCADE,
    session_name TEXT NOT NULL,
    started_at TEXT NOT NULL
);
CREATE INDEX sessions_of_agent ON sessions(agent_id, id);

CREATE TABLE turns (
    id INTEGER PRIMARY KEY,
    turn_id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    agent_id TEXT NOT NULL,
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
CREATE INDEX turns_of_session ON turns(session_id, id);
-- At most one running turn per session, enforced by the database itself.
CREATE UNIQUE INDEX one_running_turn ON turns(session_id) WHERE status = 'in_progress';

CREATE TABLE steps (
    id INTEGER PRIMARY KEY,
    step_id TEXT NOT NULL UNIQUE,
    turn_id TEXT NOT NULL REFERENCES turns(turn_id) ON DELETE CASCADE,
    step_type TEXT NOT NULL,
    pending INTEGER NOT NULL DEFAULT 0,
    body TEXT NOT NULL
);
CREATE INDEX steps_of_turn ON steps(turn_id, id);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    turn_id TEXT NOT NULL REFERENCES turns(turn_id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX messages_of_session ON messages(session_id, id);
CREATE INDEX messages_of_turn ON messages(turn_id);
