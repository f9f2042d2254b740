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
    status      VARCHAR NOT NULL,      -- running | ok | failed | interrupted | aborted (its process died)
    summary     JSON,
    error       VARCHAR
);
-- the running process, so a run whose process died is seen as aborted (pipeline/warehouse/runs.py); added later
ALTER TABLE runs ADD COLUMN IF NOT EXISTS pid INTEGER;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS host VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS proc_start BIGINT;
-- the moment the run judged by (`--as-of`, else its start); started_at and finished_at are always the wall clock
ALTER TABLE runs ADD COLUMN IF NOT EXISTS as_of TIMESTAMP;
CREATE TABLE IF NOT EXISTS alerts (
    alert_id      VARCHAR NOT NULL,      -- stable: the receiver's idempotency key
    sink          VARCHAR NOT NULL,      -- the sink's name (alerts.sinks; its kind when unnamed)
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
-- added by later versions; existing databases get the columns here
ALTER TABLE evaluations ADD COLUMN IF NOT EXISTS trigger VARCHAR DEFAULT 'manual';   -- ci | nightly | manual
ALTER TABLE evaluations ADD COLUMN IF NOT EXISTS evaluation_uid VARCHAR;            -- one evaluation is stored once
-- rollout state per segment (pipeline/rollout/state.py): one look per segment and as-of day, the
-- latest stored evaluation of that day winning; the state is replayed from the looks
CREATE TABLE IF NOT EXISTS rollout_looks (
    release        VARCHAR NOT NULL,
    segment        VARCHAR NOT NULL,      -- task/tier/bucket, or "release" for the release-wide gates
    day            DATE NOT NULL,         -- the as-of day of the evaluation
    outcome        VARCHAR NOT NULL,      -- fail | pass | insufficient
    decision       VARCHAR NOT NULL,      -- the segment's decision (the verdict for "release")
    failed_gates   VARCHAR[] NOT NULL,
    evaluation_uid VARCHAR NOT NULL,
    evaluated_at   TIMESTAMP NOT NULL,
    trigger        VARCHAR NOT NULL,
    PRIMARY KEY (release, segment, day)
);
CREATE TABLE IF NOT EXISTS rollout_state (
    release        VARCHAR NOT NULL,
    segment        VARCHAR NOT NULL,
    state          VARCHAR NOT NULL,      -- ok | suspect | rolled_back | recovering
    since          DATE,                  -- the day it entered the state
    last_day       DATE NOT NULL,
    last_decision  VARCHAR NOT NULL,
    last_fail      DATE,
    passes         INTEGER NOT NULL,      -- consecutive passing looks (recovering)
    recent         VARCHAR NOT NULL,      -- the last decisive looks, oldest first: F fail, P pass
    failed_gates   VARCHAR[] NOT NULL,    -- of the last failing look
    reason         VARCHAR NOT NULL,
    updated_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (release, segment)
);
-- the Spark engine's two-step commit (pipeline/warehouse/spark/storage.py): a batch Spark staged as Parquet is committed
-- here, in the transaction that stores its manifest rows, then published into the tables' partitions
CREATE TABLE IF NOT EXISTS spark_batches (
    batch_id     VARCHAR PRIMARY KEY,
    kind         VARCHAR NOT NULL,      -- ingest | rollup
    clear        JSON NOT NULL,         -- per table, the partitions publish empties before it lands the batch
    committed_at TIMESTAMP NOT NULL,
    published_at TIMESTAMP
);
-- the failing gates of mode hold of a look (pipeline/rollout/state.py); added later
ALTER TABLE rollout_looks ADD COLUMN IF NOT EXISTS held_gates VARCHAR[] DEFAULT [];
-- people's actions on a rollout, on the record (pipeline/rollout/actions.py)
CREATE TABLE IF NOT EXISTS rollout_actions (
    action_id  VARCHAR PRIMARY KEY,   -- digest of release, segment, action, reason and until: asked twice, stored once
    release    VARCHAR NOT NULL,
    segment    VARCHAR NOT NULL,      -- task/tier/bucket, or * for the whole release
    action     VARCHAR NOT NULL,      -- pause | resume | rollback | promote
    reason     VARCHAR NOT NULL,
    actor      VARCHAR NOT NULL,
    taken_at   TIMESTAMP NOT NULL,
    until      TIMESTAMP,             -- when it ends by itself (required for promote)
    gates      VARCHAR[] NOT NULL,    -- promote: the gates whose failures it accepts
    previous   JSON NOT NULL,         -- per segment of its scope: the state and route before it
    stored_at  TIMESTAMP NOT NULL
);
-- objects of an s3:// landing that were fetched and read (pipeline/ingest/from_bucket.py): an object whose
-- (key, size, etag) is here is not fetched again; new bytes under the same key are (their rows deduplicated)
CREATE TABLE IF NOT EXISTS landed_objects (
    source      VARCHAR NOT NULL,      -- s3://bucket
    key         VARCHAR NOT NULL,
    size_bytes  BIGINT NOT NULL,
    etag        VARCHAR NOT NULL,      -- not a content hash (a multipart upload's is md5 of the parts' md5s)
    version_id  VARCHAR,               -- when the bucket keeps versions
    sha256      VARCHAR NOT NULL,      -- of the bytes read: the manifest (files) knows the file by it
    status      VARCHAR NOT NULL,      -- loaded | rejected | skipped (its bytes were ingested before)
    read_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (source, key, size_bytes, etag)
);
-- per s3:// landing, the last key its listing saw: the next listing starts at that key's date folder
CREATE TABLE IF NOT EXISTS landing_marks (
    landing     VARCHAR PRIMARY KEY,   -- s3://bucket/prefix
    last_key    VARCHAR NOT NULL,
    listed_at   TIMESTAMP NOT NULL
);
-- the days moved to the archive (pipeline/warehouse/archive.py): what left the file, verified in the archive
-- before it was deleted here; a day is read from the archive exactly when it has a row here
CREATE TABLE IF NOT EXISTS archived_days (
    kind           VARCHAR NOT NULL,      -- events | quarantine
    release        VARCHAR NOT NULL,      -- '' for quarantine (partitioned by the day it was quarantined)
    day            DATE NOT NULL,
    rows           BIGINT NOT NULL,
    checksum       VARCHAR NOT NULL,      -- sum of DuckDB's hash of every column of every row
    table_version  BIGINT NOT NULL,       -- the Delta table's version that holds the day
    archived_at    TIMESTAMP NOT NULL,
    PRIMARY KEY (kind, release, day)
);
-- when an evaluation was stored (wall clock): the decision's time, from which publishing is timed; added later
ALTER TABLE evaluations ADD COLUMN IF NOT EXISTS stored_at TIMESTAMP;
-- every publish of a routing table to a publish target (pipeline/delivery/publish.py), and every failure
CREATE TABLE IF NOT EXISTS routing_publishes (
    target         VARCHAR NOT NULL,      -- the target's name (publish.targets: its name, else its uri)
    release        VARCHAR NOT NULL,
    sha256         VARCHAR NOT NULL,      -- the table's content_sha256
    evaluation_uid VARCHAR NOT NULL,
    kind           VARCHAR NOT NULL,      -- decision | rollback | takeover
    reason         VARCHAR NOT NULL,      -- a rollback's or takeover's reason ('' for a decision)
    actor          VARCHAR NOT NULL,
    decided_at     TIMESTAMP NOT NULL,    -- when the decision was stored
    published_at   TIMESTAMP NOT NULL,    -- when it was readable (or the attempt failed)
    seconds        DOUBLE,                -- published_at - decided_at
    status         VARCHAR NOT NULL,      -- published | failed
    etag           VARCHAR,               -- what the next write's If-Match names
    version_id     VARCHAR,
    error          VARCHAR
);
-- intra-day looks (pipeline look, docs/intraday.md): the whole days and the day so far, judged between nightly
-- runs. A failing segment's look moves its rollout state toward the cloud (a pass moves nothing); none is an
-- evaluation of a day, so whole-day verdicts and `evaluations` are what they would be without them
CREATE TABLE IF NOT EXISTS intraday_looks (
    look_uid        VARCHAR PRIMARY KEY,
    release         VARCHAR NOT NULL,
    as_of           TIMESTAMP NOT NULL,
    evaluated_at    TIMESTAMP NOT NULL,
    stored_at       TIMESTAMP NOT NULL,
    verdict         VARCHAR NOT NULL,
    failed_segments VARCHAR[] NOT NULL,    -- the segments (and 'release') whose look failed
    failed_gates    VARCHAR[][] NOT NULL,  -- each failed segment's enforced failing gates, in the same order
    moved           VARCHAR[] NOT NULL,    -- the segments whose rollout state this look moved
    landed_from     TIMESTAMP,             -- the oldest landing time of the files its run loaded (NULL: none)
    config_digest   VARCHAR NOT NULL,
    code_version    VARCHAR NOT NULL,
    result          JSON NOT NULL
);
