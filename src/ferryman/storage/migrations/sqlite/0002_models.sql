-- Models registered at run time (POST /v1/models); configured and discovered ones are not stored.
CREATE TABLE models (
    id INTEGER PRIMARY KEY,
    model_id TEXT NOT NULL UNIQUE,
    provider_id TEXT NOT NULL,
    provider_resource_id TEXT NOT NULL,
    model_type TEXT NOT NULL,
    metadata TEXT NOT NULL,
    created_at TEXT NOT NULL
);
