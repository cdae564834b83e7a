-- Idempotency keys of requests, per owner (the caller; '' until auth exists).
-- Times are epoch seconds; result is NULL while the first call runs.
CREATE TABLE idempotency_keys (
    owner TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    token TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    result TEXT,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (owner, idempotency_key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys(expires_at);
