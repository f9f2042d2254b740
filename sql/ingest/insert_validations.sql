-- name: insert_validations
-- description: Great Expectations' result per rule for each file of a group
-- params:
INSERT INTO validations SELECT file_id, rule, expectation, success, element_count, unexpected_count FROM group_validations
