-- name: cast_macros
-- description: casts of a landed file's columns to the contract's types, one per kind of source column (pipeline/ingest/reading.py picks them from the file's types); a value that cannot be cast raises, naming the column
-- Each takes the value and the column's name. CASE evaluates a branch only for the rows that reach it.
CREATE OR REPLACE MACRO stage.int_to_int32(v, name) AS CASE
    WHEN v IS NULL OR v BETWEEN -2147483648 AND 2147483647 THEN CAST(v AS INTEGER)
    ELSE error(concat('column ''', name, ''' cannot be cast to int32: ', v, ' is outside -2147483648 to 2147483647'))
END;
-- a fraction is not rounded away; NaN and infinities are refused too
CREATE OR REPLACE MACRO stage.float_to_int32(v, name) AS CASE
    WHEN v IS NULL THEN NULL
    WHEN v = trunc(v) AND v BETWEEN -2147483648 AND 2147483647 THEN CAST(v AS INTEGER)
    ELSE error(concat('column ''', name, ''' cannot be cast to int32: ', v,
                      ' is not a whole number from -2147483648 to 2147483647'))
END;
-- a double holds every integer up to 2^53 exactly; a larger one would load as another number
CREATE OR REPLACE MACRO stage.int_to_float64(v, name) AS CASE
    WHEN v IS NULL OR v BETWEEN -9007199254740992 AND 9007199254740992 THEN CAST(v AS DOUBLE)
    ELSE error(concat('column ''', name, ''' cannot be cast to float64: ', v,
                      ' is outside -9007199254740992 to 9007199254740992 (not exact as a double)'))
END;
-- NaN is not a measurement: it counts as missing
CREATE OR REPLACE MACRO stage.float_to_float64(v, name) AS CASE WHEN isnan(v) THEN NULL ELSE CAST(v AS DOUBLE) END;
-- naive timestamps mean UTC; a zoned one is its UTC wall time (epoch_us counts from the UTC epoch)
CREATE OR REPLACE MACRO stage.to_timestamp(v, name) AS make_timestamp(epoch_us(v));
-- sub-microsecond digits are below telemetry's precision: ns is truncated to µs (toward zero, as Arrow does)
CREATE OR REPLACE MACRO stage.ns_to_timestamp(v, name) AS make_timestamp(epoch_ns(v) // 1000);
