-- name: quarantine_reasons
-- description: quarantined rows per broken rule and source file (in the file and in the archive)
-- params: release (optional)
SELECT rule, source_file, count(*) AS rows
FROM (SELECT unnest(rules) AS rule, source_file, release FROM all_quarantine)
WHERE $release IS NULL OR release = $release
GROUP BY ALL
ORDER BY rows DESC, rule, source_file
