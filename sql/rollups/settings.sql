-- name: settings
-- description: store the thresholds of gates/admission.yaml that derived fields use
-- params: weak_rtt_ms, weak_network_types, daily_edge_seconds_cap, digest, updated_at
INSERT INTO pipeline_settings VALUES ($weak_rtt_ms, $weak_network_types, $daily_edge_seconds_cap, $digest, $updated_at)
