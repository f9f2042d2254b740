-- name: update_file_counts
-- description: the counts of a file once its rows are in
-- params: file_id, accepted, quarantined, duplicates
UPDATE files SET accepted = $accepted, quarantined = $quarantined, duplicates = $duplicates
WHERE file_id = $file_id
