-- name: publishes
-- description: per release and publish target, the seconds from the decision to the object readable of the last successful publish, and whether the last attempt failed
SELECT release, target,
       arg_max(seconds, published_at) FILTER (WHERE status = 'published') AS seconds,
       arg_max(status, published_at) = 'failed' AS failing
FROM routing_publishes
GROUP BY release, target
ORDER BY release, target
