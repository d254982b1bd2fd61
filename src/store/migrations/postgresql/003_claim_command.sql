-- 3: the command a `once` claim runs, so the claim stays held while the command lives even if
-- the `once` process itself was killed.
ALTER TABLE claims ADD COLUMN cmd_pid INTEGER;
ALTER TABLE claims ADD COLUMN cmd_start TEXT;
