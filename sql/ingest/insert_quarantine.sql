-- name: insert_quarantine
-- description: rows of one staged file that broke rules, with every original value and all the rules they broke
-- params: file_id, source_file, quarantined_at, first, last
INSERT INTO quarantine BY NAME
SELECT b.* EXCLUDE (_id), b._id - $first AS row_in_file, f.rules, $file_id AS file_id,
       $source_file AS source_file, $quarantined_at AS quarantined_at
FROM stage.validated b
JOIN (SELECT _id, list(rule ORDER BY rule_pos) AS rules FROM batch_failures
      WHERE _id BETWEEN $first AND $last GROUP BY _id) f USING (_id)
WHERE b._id BETWEEN $first AND $last
