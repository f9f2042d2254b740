SELECT
  CAST(:weak_rtt_ms AS DOUBLE) AS weak_rtt_ms,
  CAST(:weak_network_types AS ARRAY<STRING>) AS weak_network_types,
  CAST(:daily_edge_seconds_cap AS DOUBLE) AS daily_edge_seconds_cap
