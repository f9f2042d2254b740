-- name: find_collisions
-- description: event_ids of the staged batch's valid rows that have another valid copy, in the batch or stored
CREATE OR REPLACE TEMP TABLE collided AS
WITH valid AS (
    SELECT event_id FROM stage.validated b WHERE NOT EXISTS (SELECT 1 FROM batch_failures f WHERE f._id = b._id)
)
SELECT event_id FROM valid GROUP BY event_id HAVING count(*) > 1
UNION
SELECT e.event_id FROM events e SEMI JOIN valid v ON e.event_id = v.event_id
