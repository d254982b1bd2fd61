-- 10: a run is every process it started (src/run/cgroup.ts). What a finished run cost: the CPU
-- seconds (user + system) of all its processes and its peak memory in bytes, null for runs
-- recorded before this or where nothing was measured (interrupted, spawn failed). And how the
-- daemon contains its runs, as it said at its claim: {"mode", "reason"} as JSON.
ALTER TABLE runs ADD COLUMN cpu_s REAL;
ALTER TABLE runs ADD COLUMN memory_peak_bytes INTEGER;
ALTER TABLE daemon ADD COLUMN containment TEXT;
