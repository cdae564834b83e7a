-- Idempotency keys of requests, per owner (the caller; '' until auth exists).
-- result is NULL while the first call runs.
CREATE TABLE idempotency_keys (
    owner TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    token TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (owner, idempotency_key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys(expires_at);
