-- name: collisions_in_run
-- description: event_ids of the staged batch's valid rows with another valid copy in this run, in the batch or in an earlier batch; then the batch's keys join the run's
-- Run by the staging thread, off the storing's critical path. Copies are matched by a 64-bit hash of the
-- event_id (stage.run_keys holds 8 bytes per valid row of the run); a false match only sends the row
-- through rank_copies.sql, which compares the event_ids themselves.
CREATE OR REPLACE TEMP TABLE batch_keys AS
SELECT _id, hash(event_id) AS key FROM stage.batch b WHERE NOT EXISTS (SELECT 1 FROM batch_failures f WHERE f._id = b._id);
CREATE OR REPLACE TEMP TABLE collided_keys AS
SELECT key FROM batch_keys GROUP BY key HAVING count(*) > 1
UNION
SELECT key FROM batch_keys SEMI JOIN stage.run_keys USING (key);
CREATE OR REPLACE TEMP TABLE batch_collided AS
SELECT DISTINCT b.event_id FROM stage.batch b JOIN batch_keys k USING (_id) SEMI JOIN collided_keys USING (key);
INSERT INTO stage.run_keys SELECT key FROM batch_keys;
DROP TABLE batch_keys;
DROP TABLE collided_keys
