-- name: intraday
-- description: per release, its newest intra-day look that moved a rollout state: seconds from the oldest file that look read landing to its routing table first published (docs/intraday.md)
-- params:
SELECT release, epoch(published_at - landed_from) AS seconds
FROM (SELECT l.release, l.landed_from,
             (SELECT min(p.published_at) FROM routing_publishes p
              WHERE p.evaluation_uid = l.look_uid AND p.status = 'published') AS published_at,
             row_number() OVER (PARTITION BY l.release ORDER BY l.evaluated_at DESC) AS newest
      FROM intraday_looks l WHERE len(l.moved) > 0)
WHERE newest = 1 AND published_at IS NOT NULL AND landed_from IS NOT NULL
ORDER BY release
