-- The last key the previous listing of this s3:// landing saw (no row: never listed).
SELECT last_key FROM landing_marks WHERE landing = $landing
