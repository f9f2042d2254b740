-- name: insert_quarantine
-- description: rows of a group's staged files that broke rules, with every original value and all the rules they broke
-- params: quarantined_at
INSERT INTO quarantine BY NAME
SELECT b.* EXCLUDE (_id, _staged_file), b._id - g.first AS row_in_file, f.rules, g.file_id,
       g.path AS source_file, $quarantined_at AS quarantined_at
FROM stage.validated b
JOIN group_files g ON g.staged_file = b._staged_file
JOIN (SELECT _id, list(rule ORDER BY rule_pos) AS rules FROM batch_failures GROUP BY _id) f USING (_id)
