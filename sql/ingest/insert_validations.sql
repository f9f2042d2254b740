-- name: insert_validations
-- description: Great Expectations' result per rule for one file
-- params: file_id
INSERT INTO validations SELECT $file_id, rule, expectation, success, element_count, unexpected_count FROM file_validations
