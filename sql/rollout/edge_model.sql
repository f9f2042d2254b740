-- name: edge_model
-- description: the model_id that served most of a release's edge rows (routing.previous_edge names it)
-- params: release
SELECT model_id FROM rollup_device_day
WHERE release = $release AND route <> 'cloud' AND model_id IS NOT NULL
GROUP BY model_id ORDER BY sum(rows) DESC, model_id LIMIT 1
