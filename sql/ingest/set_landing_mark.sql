-- After a listing that went to its end: the last key it saw (a mark only moves forward).
INSERT INTO landing_marks VALUES ($landing, $last_key, $listed_at)
ON CONFLICT (landing) DO UPDATE SET last_key = greatest(landing_marks.last_key, excluded.last_key),
                                    listed_at = excluded.listed_at
