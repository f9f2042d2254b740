-- name: changed_days
-- description: the temp table changed_days: the (release, day)s whose roll-ups were recomputed in the warehouse (catalog `warehouse`) since the snapshot being built (catalog `main`) was, by rollup_day_versions
-- A day's three roll-ups are recomputed together, and each refresh moves the version of the days it recomputed.
CREATE OR REPLACE TEMP TABLE changed_days AS
SELECT release, day FROM (SELECT * FROM warehouse.main.rollup_day_versions EXCEPT SELECT * FROM main.rollup_day_versions)
UNION
SELECT release, day FROM (SELECT * FROM main.rollup_day_versions EXCEPT SELECT * FROM warehouse.main.rollup_day_versions)
