// The daemon command's signals: TERM or INT stops in order (a second one kills every run now),
// HUP re-reads the config. Installed before the daemon starts: a signal's default action would
// kill it there, and under the unit's KillMode=process the runs start-up adopted or started
// would be left behind; such a signal acts once start-up is done.
import { EXIT } from "../core/exit.js";

/** What the signals drive; `reload()` may be synchronous or return a promise. */
export interface Stoppable {
  stop(): Promise<void>;
  force(): void;
  reload(): unknown;
}

/** `started` settles when start-up ends; a failed start-up exits by its own path, not here. */
export function handleDaemonSignals(
  sup: Stoppable,
  started: Promise<unknown> = Promise.resolve(),
): void {
  const afterStart = (fn: () => unknown): Promise<unknown> =>
    started.then(fn, () => new Promise<never>(() => {}));
  let signals = 0;
  const onStop = (sig: string): void => {
    signals++;
    if (signals === 1) {
      process.stderr.write(`cronvisor: ${sig}: stopping (again to force)\n`);
      void afterStart(() => sup.stop()).then(
        () => process.exit(EXIT.ok),
        (e: unknown) => {
          process.stderr.write(`cronvisor: ${(e as Error).message}\n`);
          process.exit(EXIT.fail);
        },
      );
    } else {
      process.stderr.write(`cronvisor: ${sig} again: killing every run now\n`);
      sup.force();
    }
  };
  process.on("SIGTERM", () => onStop("SIGTERM"));
  process.on("SIGINT", () => onStop("SIGINT"));
  // A failed reload keeps the running config (the supervisor logs why); a rejection must not
  // escape the signal handler and end the daemon.
  process.on("SIGHUP", () => {
    afterStart(() => sup.reload()).catch((e: unknown) =>
      process.stderr.write(`cronvisor: reload failed: ${(e as Error).message}\n`),
    );
  });
}
