// `cronvisor import-crontab`: translate a crontab into jobs YAML on stdout.
import fs from "node:fs";
import { EXIT } from "../core/exit.js";
import { CliError } from "./shared.js";

export async function importCrontabCommand(
  file: string | undefined,
  o: { system?: boolean; skipInvalid?: boolean },
): Promise<void> {
  const { importCrontab } = await import("../crontab/index.js");
  const text = readCrontab(file);
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

/**
 * The crontab's text: stdin for `-` (fd 0, not /dev/stdin: a pipe from spawn() cannot be reopened
 * by path), else the file. A pipe is read as it comes (`import-crontab <(crontab -l)`); a file that
 * cannot be read is a usage error naming it.
 */
function readCrontab(file: string | undefined): string {
  if (file === undefined || file === "-") return fs.readFileSync(0, "utf8");
  try {
    return fs.readFileSync(file, "utf8");
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === "ENOENT"
        ? "no such file"
        : code === "EISDIR"
          ? "is a directory"
          : code === "EACCES"
            ? "permission denied"
            : (code ?? (e as Error).message);
    throw new CliError(`cronvisor: cannot read ${file}: ${why}`, EXIT.usage);
  }
}
