-- name: tables
-- description: the warehouse's bookkeeping tables (events and quarantine are generated from schemas/)
CREATE SEQUENCE IF NOT EXISTS file_id_seq START 1;
CREATE TABLE IF NOT EXISTS files (
    file_id        INTEGER PRIMARY KEY,
    path           VARCHAR NOT NULL,
    size_bytes     BIGINT NOT NULL,
    sha256         VARCHAR NOT NULL,
    rows_read      BIGINT NOT NULL,
    accepted       BIGINT NOT NULL,
    quarantined    BIGINT NOT NULL,
    duplicates     BIGINT NOT NULL,
    status         VARCHAR NOT NULL,      -- loaded | rejected
    reason         VARCHAR,               -- why a file was rejected
    extra_columns  VARCHAR[],             -- columns not in the contract, ignored
    missing_columns VARCHAR[],            -- nullable contract columns absent, loaded as NULL
    ingested_at    TIMESTAMP NOT NULL
);
CREATE TABLE IF NOT EXISTS validations (
    file_id          INTEGER NOT NULL,
    rule             VARCHAR NOT NULL,
    expectation      VARCHAR NOT NULL,
    success          BOOLEAN NOT NULL,
    element_count    BIGINT NOT NULL,
    unexpected_count BIGINT NOT NULL
);
CREATE SEQUENCE IF NOT EXISTS evaluation_id_seq START 1;
CREATE TABLE IF NOT EXISTS evaluations (
    evaluation_id  INTEGER PRIMARY KEY,
    release        VARCHAR NOT NULL,
    as_of          TIMESTAMP NOT NULL,
    evaluated_at   TIMESTAMP NOT NULL,
    verdict        VARCHAR NOT NULL,
    segments_judged INTEGER NOT NULL,
    segments_rolled_back INTEGER NOT NULL,
    failed_gates   VARCHAR[] NOT NULL,
    config_digest  VARCHAR NOT NULL,
    code_version   VARCHAR NOT NULL,
    result         JSON NOT NULL
);
CREATE SEQUENCE IF NOT EXISTS run_id_seq START 1;
CREATE TABLE IF NOT EXISTS runs (
    run_id      INTEGER PRIMARY KEY,
    kind        VARCHAR NOT NULL,      -- nightly | scheduled
    started_at  TIMESTAMP NOT NULL,
    finished_at TIMESTAMP,
    status      VARCHAR NOT NULL,      -- running | ok | failed | interrupted
    summary     JSON,
    error       VARCHAR
);
CREATE TABLE IF NOT EXISTS alerts (
    alert_id      VARCHAR NOT NULL,      -- stable: the receiver's idempotency key
    sink          VARCHAR NOT NULL,      -- stdout | jsonl | webhook
    release       VARCHAR NOT NULL,
    verdict       VARCHAR NOT NULL,
    signature     VARCHAR NOT NULL,      -- verdict and failing segments/gates: what "changed" means
    severity      VARCHAR NOT NULL,      -- info | critical
    created_at    TIMESTAMP NOT NULL,
    payload       JSON NOT NULL,
    status        VARCHAR NOT NULL,      -- pending | delivered | failed (permanent)
    attempts      INTEGER NOT NULL,
    last_error    VARCHAR,
    delivered_at  TIMESTAMP,
    PRIMARY KEY (alert_id, sink)
);
