-- name: alerts
-- description: the alert outbox's deliveries per sink and status, for `pipeline metrics`
-- params:
SELECT sink, status, count(*) AS n FROM alerts GROUP BY ALL ORDER BY sink, status
