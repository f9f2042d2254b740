-- name: adoption
-- description: adoption rate per day, edge vs cloud, with the relative loss of the edge
-- params: release
WITH d AS (
    SELECT day, sum(CASE WHEN route <> 'cloud' THEN rows END) AS edge_rows,
           sum(CASE WHEN route = 'cloud' THEN rows END) AS cloud_rows,
           sum(CASE WHEN route <> 'cloud' THEN adoption_rate * rows END) AS edge_adopted,
           sum(CASE WHEN route = 'cloud' THEN adoption_rate * rows END) AS cloud_adopted
    FROM rollup_daily WHERE release = $release GROUP BY day
)
SELECT day, edge_rows, cloud_rows,
       round(edge_adopted / edge_rows, 4) AS edge_adoption,
       round(cloud_adopted / cloud_rows, 4) AS cloud_adoption,
       round((cloud_adopted / cloud_rows - edge_adopted / edge_rows) / (cloud_adopted / cloud_rows), 4)
           AS relative_loss
FROM d ORDER BY day
