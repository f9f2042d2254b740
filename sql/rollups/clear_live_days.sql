-- name: clear_live_days
-- description: a full rebuild's first step: drop the rollup rows of every day whose raw events are in the file
-- The days moved to the archive keep their rollups (their raw events are no longer here to recompute them from;
-- docs/archive.md): archived_days lists them.
DELETE FROM rollup_daily r WHERE NOT EXISTS (
    SELECT 1 FROM archived_days a WHERE a.kind = 'events' AND a.release = r.release AND a.day = r.day);
DELETE FROM rollup_hist r WHERE NOT EXISTS (
    SELECT 1 FROM archived_days a WHERE a.kind = 'events' AND a.release = r.release AND a.day = r.day);
DELETE FROM rollup_device_day r WHERE NOT EXISTS (
    SELECT 1 FROM archived_days a WHERE a.kind = 'events' AND a.release = r.release AND a.day = r.day);
