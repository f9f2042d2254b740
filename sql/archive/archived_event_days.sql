-- name: archived_event_days
-- description: the (release, day)s whose raw events are in the archive: ingest quarantines late rows of these days
SELECT release, day FROM archived_days WHERE kind = 'events'
