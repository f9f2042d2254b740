-- name: record_digest
-- description: records the digest of the DDL just applied: the next writer's opening skips it while it is the same
-- params: digest
CREATE TABLE IF NOT EXISTS pipeline_ddl (digest VARCHAR NOT NULL);
DELETE FROM pipeline_ddl;
INSERT INTO pipeline_ddl VALUES ($digest);
