-- name: applied_digest
-- description: the digest of the DDL (events_ddl, ddl/tables.sql, ddl/derived.sql) last applied to this warehouse
SELECT digest FROM pipeline_ddl
