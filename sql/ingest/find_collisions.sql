-- name: find_collisions
-- description: event_ids of the staged batch's valid rows that have another valid copy: in this run (batch_collided, found by the staging thread) or stored before the run
-- params: stored_before
-- Rows stored by this run have file_id > $stored_before: the filter lets DuckDB skip their row groups (file_id
-- is constant in each), so a batch scans only the event_ids that were in the warehouse when the run began.
CREATE OR REPLACE TEMP TABLE collided AS
WITH valid AS (
    SELECT event_id FROM stage.validated b WHERE NOT EXISTS (SELECT 1 FROM batch_failures f WHERE f._id = b._id)
)
SELECT event_id FROM batch_collided
UNION
SELECT e.event_id FROM events e SEMI JOIN valid v ON e.event_id = v.event_id WHERE e.file_id <= $stored_before
