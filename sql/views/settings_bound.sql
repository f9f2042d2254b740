-- name: settings_bound
-- description: the thresholds derived fields use, from bound values (engines without session variables: Spark)
-- params: weak_rtt_ms, weak_network_types, daily_edge_seconds_cap
-- The DuckDB warehouse keeps them in pipeline_settings and the view settings_in_effect (ddl/derived.sql);
-- the Spark engine registers this one-row query as settings_in_effect, from the config it runs with.
SELECT CAST($weak_rtt_ms AS DOUBLE) AS weak_rtt_ms,
       CAST($weak_network_types AS VARCHAR[]) AS weak_network_types,
       CAST($daily_edge_seconds_cap AS DOUBLE) AS daily_edge_seconds_cap
