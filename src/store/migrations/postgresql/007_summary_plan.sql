-- 7: the job summary's refresh (006's job_summary_refresh, run by the trigger at every run's end)
-- reads a job's newest 20 finished runs, planned without statistics while autovacuum has not yet
-- analyzed `runs` (a new store, or one whose runs grew fast): the planner then guessed a job has
-- a few rows, read all of them (a bitmap scan) and sorted them, about 3 ms per end at 1,000
-- runs of a job, growing with them. With sorts off, the only plan left in id order is the walk
-- of runs_by_job (job, id) backwards, which stops at the 20th finished run: what the planner
-- picks anyway once it has statistics. For this function only, set on entry and restored on exit.
ALTER FUNCTION job_summary_refresh(TEXT) SET enable_sort = off;
