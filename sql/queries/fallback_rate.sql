-- name: fallback_rate
-- description: fallback rate (user fallback or auto_fallback) by release, day, tier and network bucket, edge vs cloud
-- params: release (optional), since (optional, date)
SELECT release, day, device_tier, network_bucket,
       CASE WHEN route = 'cloud' THEN 'cloud' ELSE 'edge' END AS side,
       sum(rows) AS rows,
       round(sum(fallback_rate * rows) / sum(rows), 4) AS fallback_rate,
       round(sum(auto_fallback_rate * rows) / sum(rows), 4) AS auto_fallback_rate
FROM rollup_daily
WHERE ($release IS NULL OR release = $release)
  AND ($since IS NULL OR day >= CAST($since AS DATE))
GROUP BY ALL
ORDER BY release, day, device_tier, network_bucket, side
