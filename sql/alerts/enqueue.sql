-- name: enqueue
-- description: put one alert in the outbox for one sink
-- params: alert_id, sink, release, verdict, signature, severity, created_at, payload
INSERT INTO alerts VALUES ($alert_id, $sink, $release, $verdict, $signature, $severity, $created_at, $payload,
                           'pending', 0, NULL, NULL)
ON CONFLICT DO NOTHING
