// The accounts jobs run as (`user:`), read from /etc/passwd: the runner needs the uid, gid, home
// and shell; the config's safety check needs the uid a job's env_file may be owned by.
import fs from "node:fs";

/** The account a job runs as, from /etc/passwd. */
export interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
  shell: string;
}

/** The /etc/passwd entry for a user name (or a numeric uid), or null if there is none. */
export function lookupUser(name: string, passwdFile = "/etc/passwd"): PasswdEntry | null {
  return parsePasswd(fs.readFileSync(passwdFile, "utf8"), name);
}

/** Pure: find `name` in passwd(5) text (`name:x:uid:gid:gecos:home:shell`). */
export function parsePasswd(text: string, name: string): PasswdEntry | null {
  let byUid: PasswdEntry | null = null;
  for (const line of text.split("\n")) {
    const f = line.split(":");
    if (f.length < 7 || line.startsWith("#")) continue;
    const entry: PasswdEntry = {
      name: f[0] as string,
      uid: Number(f[2]),
      gid: Number(f[3]),
      home: f[5] as string,
      shell: (f[6] as string) || "/bin/sh", // passwd(5): an empty shell means /bin/sh
    };
    if (!Number.isInteger(entry.uid) || !Number.isInteger(entry.gid)) continue;
    if (entry.name === name) return entry;
    if (byUid === null && /^[0-9]+$/.test(name) && entry.uid === Number(name)) byUid = entry;
  }
  return byUid;
}
