-- name: insert_quarantine
-- description: rows of the batch that broke rules, with every original value and all the rules they broke
-- params: file_id, source_file, quarantined_at
INSERT INTO quarantine BY NAME
SELECT b.* EXCLUDE (_row), b._row AS row_in_file, f.rules, $file_id AS file_id,
       $source_file AS source_file, $quarantined_at AS quarantined_at
FROM batch b
JOIN (SELECT _row, list(rule ORDER BY rule_pos) AS rules FROM batch_failures GROUP BY _row) f USING (_row)
