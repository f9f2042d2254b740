-- name: all_events
-- description: the temp views all_events and all_quarantine: the rows in the file and the days in the archive, as one relation each (ad hoc SQL, pipeline query)
-- A day is read from the archive exactly when archived_days lists it, and it is deleted from the file in the
-- transaction that lists it: a day is never counted twice, even when a move was stopped after its Delta commit.
-- `day` (and `quarantined_day`) are the archive's partition columns: filtering on them skips the other days' files.
CREATE OR REPLACE TEMP VIEW all_events AS
SELECT *, CAST(event_time AS DATE) AS day FROM events
UNION ALL BY NAME
SELECT a.* FROM archived_events a
SEMI JOIN (SELECT release, day FROM archived_days WHERE kind = 'events') d ON a.release = d.release AND a.day = d.day;
CREATE OR REPLACE TEMP VIEW all_quarantine AS
SELECT *, CAST(quarantined_at AS DATE) AS quarantined_day FROM quarantine
UNION ALL BY NAME
SELECT a.* FROM archived_quarantine a
SEMI JOIN (SELECT day FROM archived_days WHERE kind = 'quarantine') d ON a.quarantined_day = d.day;
