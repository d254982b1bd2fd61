/** Options every Cron built from a config must use (the scheduler's too). */
export const CRON_OPTIONS = {
  mode: "5-or-6-parts",
  // Vixie cron semantics: when both day-of-month and day-of-week are restricted, either matches.
  domAndDow: false,
} as const;
