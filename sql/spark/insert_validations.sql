-- name: insert_validations
-- description: Great Expectations' result per rule and file of a Spark batch (the registered table batch_validations)
INSERT INTO validations SELECT file_id, rule, expectation, success, element_count, unexpected_count FROM batch_validations
