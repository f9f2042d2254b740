-- name: intraday_latency
-- description: the newest intra-day look of a release that moved a rollout state: when it looked, which states it moved, when the oldest file it read had landed and when its routing table was first published (NULL: not published)
-- params: release
SELECT l.evaluated_at, l.moved, l.landed_from,
       (SELECT min(p.published_at) FROM routing_publishes p
        WHERE p.evaluation_uid = l.look_uid AND p.status = 'published') AS published_at
FROM intraday_looks l
WHERE l.release = $release AND len(l.moved) > 0
ORDER BY l.evaluated_at DESC
LIMIT 1
