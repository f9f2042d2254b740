-- name: archived_day_rows
-- description: staged rows (their _id) whose release and day are in the archive (the registered archived_event_days): late rows, quarantined with the rule day_archived
SELECT b._id FROM stage.batch b
SEMI JOIN archived_event_days a ON b.release = a.release AND CAST(b.event_time AS DATE) = a.day
ORDER BY b._id
