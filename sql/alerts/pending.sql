-- name: pending
-- description: alerts not yet delivered, oldest first
SELECT alert_id, sink, payload, attempts FROM alerts WHERE status = 'pending' ORDER BY created_at, alert_id, sink
