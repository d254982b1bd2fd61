// `cronvisor import-crontab`: translate a crontab into jobs YAML on stdout.
import fs from "node:fs";
import { EXIT } from "../core/exit.js";
import { CliError } from "./shared.js";

export async function importCrontabCommand(
  file: string | undefined,
  o: { system?: boolean; skipInvalid?: boolean },
): Promise<void> {
  const { importCrontab } = await import("../crontab/index.js");
  // fd 0, not /dev/stdin: a pipe from spawn() cannot be reopened by path.
  const text = fs.readFileSync(file === undefined || file === "-" ? 0 : file, "utf8");
  const res = importCrontab(text, {
    file: file ?? "-",
    system: o.system,
    skipInvalid: o.skipInvalid,
  });
  for (const w of res.warnings) process.stderr.write(`cronvisor: ${w}\n`);
  if (res.errors.length > 0) {
    throw new CliError(
      // Each message already names its line ("line 7: ...").
      res.errors.map((e) => `${file ?? "-"}: ${e.message}`).join("\n"),
      EXIT.usage,
    );
  }
  process.stdout.write(res.yaml);
}
