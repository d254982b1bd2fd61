-- 8: what health judges of a job's recent runs, kept in its row beside recent_runs, as
-- sqlite/008_job_verdicts.sql (the same columns and definitions; since migration 016 the one
-- definition is src/store/digest.ts). A BEFORE trigger on recent_runs sets them in the row
-- being written.
ALTER TABLE jobs ADD COLUMN recent_ok_p95_ms BIGINT;
ALTER TABLE jobs ADD COLUMN failing_streak INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN failing_run_id BIGINT;
ALTER TABLE jobs ADD COLUMN failing_status TEXT;
ALTER TABLE jobs ADD COLUMN failing_reason TEXT;
CREATE FUNCTION job_verdicts() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  runs jsonb := NEW.recent_runs::jsonb;
  v jsonb;
BEGIN
  -- No row (fewer than 5 successes) sets NULL.
  SELECT d INTO NEW.recent_ok_p95_ms
  FROM (SELECT d, row_number() OVER (ORDER BY d) AS rank, count(*) OVER () AS n
        FROM (SELECT coalesce((e ->> 5)::bigint, 0) AS d FROM jsonb_array_elements(runs) e
              WHERE e ->> 1 = 'ok') o) r
  WHERE n >= 5 AND rank = (95 * n + 99) / 100;
  SELECT e INTO v FROM jsonb_array_elements(runs) WITH ORDINALITY AS t(e, i)
  WHERE e ->> 1 IN ('ok', 'failed', 'timeout', 'spawn_failed') ORDER BY i LIMIT 1;
  IF v IS NULL OR v ->> 1 = 'ok' THEN
    NEW.failing_streak := 0;
    NEW.failing_run_id := NULL;
    NEW.failing_status := NULL;
    NEW.failing_reason := NULL;
  ELSE
    SELECT count(*) INTO NEW.failing_streak FROM jsonb_array_elements(runs) WITH ORDINALITY AS t(e, i)
    WHERE e ->> 1 IN ('failed', 'timeout', 'spawn_failed')
      AND i < (SELECT coalesce(min(i2), 1000000) FROM jsonb_array_elements(runs)
               WITH ORDINALITY AS t2(e2, i2) WHERE e2 ->> 1 = 'ok');
    NEW.failing_run_id := (v ->> 0)::bigint;
    NEW.failing_status := v ->> 1;
    NEW.failing_reason := v ->> 2;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER job_verdicts BEFORE UPDATE OF recent_runs ON jobs FOR EACH ROW
  EXECUTE FUNCTION job_verdicts();
UPDATE jobs SET recent_runs = recent_runs;
