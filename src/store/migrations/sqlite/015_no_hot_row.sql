-- 15: on PostgreSQL the data_version counter row goes (its migration 015). SQLite never had it:
-- its writers are serialised by the database lock anyway, and PRAGMA data_version serves change
-- detection at no cost. Nothing changes here; the step keeps the two numberings one.
SELECT 1;
