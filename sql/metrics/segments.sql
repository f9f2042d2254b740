-- name: segments
-- description: segments per decision in each release's latest stored evaluation, for `pipeline metrics`
-- params:
WITH latest AS (
    SELECT release, arg_max(result, evaluated_at) AS result FROM evaluations GROUP BY release
)
SELECT release, json_extract_string(s.unnest, '$.decision') AS decision, count(*) AS segments
FROM latest, unnest(CAST(json_extract(result, '$.segments') AS JSON[])) AS s
GROUP BY ALL ORDER BY release, decision
