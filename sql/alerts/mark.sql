-- name: mark
-- description: record one delivery attempt
-- params: alert_id, sink, status, last_error, delivered_at
UPDATE alerts SET status = $status, attempts = attempts + 1, last_error = $last_error, delivered_at = $delivered_at
WHERE alert_id = $alert_id AND sink = $sink
