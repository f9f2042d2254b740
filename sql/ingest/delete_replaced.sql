-- name: delete_replaced
-- description: remove the stored rows that lost to a copy in the file being stored
DELETE FROM events WHERE event_id IN (SELECT event_id FROM replaced)
