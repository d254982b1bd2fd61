-- 2: what the alerts last announced per job (failing, stuck, repeating, late), so a daemon
-- restart neither repeats an alert nor forgets to send `recovered`.
CREATE TABLE alert_state (job TEXT COLLATE "C" PRIMARY KEY, active TEXT NOT NULL,
  since BIGINT NOT NULL);
