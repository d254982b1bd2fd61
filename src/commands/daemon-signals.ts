// The daemon command's signals: TERM or INT stops in order (a second one kills every run now),
// HUP re-reads the config. Installed only once the daemon has started.
import { EXIT } from "../core/exit.js";

/** What the signals drive; `reload()` may be synchronous or return a promise. */
export interface Stoppable {
  stop(): Promise<void>;
  force(): void;
  reload(): unknown;
}

export function handleDaemonSignals(sup: Stoppable): void {
  let signals = 0;
  const onStop = (sig: string): void => {
    signals++;
    if (signals === 1) {
      process.stderr.write(`cronvisor: ${sig}: stopping (again to force)\n`);
      void sup.stop().then(
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
    Promise.resolve()
      .then(() => sup.reload())
      .catch((e: unknown) =>
        process.stderr.write(`cronvisor: reload failed: ${(e as Error).message}\n`),
      );
  });
}
