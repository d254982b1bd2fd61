// Is the PostgreSQL store's door open? A database that lets any local user connect as the
// daemon's role without a credential (trust authentication on its socket or on loopback) gives
// every user of the host the store: every job's log tail, markers to forge, pauses, fences and
// leases to change. A root daemon finds out the only sure way: it tries, as an unprivileged uid
// with an empty environment (no PGPASSWORD, no ~/.pgpass), to get past authentication as its
// role. Peer authentication mapped to root, or a password, stops that try; trust does not.
//
// The try is a child process (Node cannot change the uid of a thread): `setpriv` to uid 65534,
// then `node -e` with a script that speaks the protocol's first message itself (it reads no
// file, so a uid that cannot read cronvisor's install can run it) and says whether the server
// answered AuthenticationOk. It sends nothing else and reads nothing of the database.
import { spawn } from "node:child_process";
import fs from "node:fs";
import pg from "pg";
import { describeUrl } from "./pg-connection.js";

/** The uid (and gid) the try runs as: `nobody` on Debian, and any uid with no role of its own. */
const PROBE_ID = 65534;
const PROBE_MS = 5000;
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => fs.existsSync(p)) ?? null;

/**
 * argv: TARGET PORT USER DATABASE, TARGET a socket directory or a host. Prints `open` when the
 * server lets it in without a credential, else `closed WHY`. Over TCP it asks for TLS first (a
 * server may take trust only on hostssl lines) and goes on in the clear if refused.
 */
const PROBE = String.raw`
const net = require("net"), tls = require("tls");
const [target, port, user, database] = process.argv.slice(1);
const say = (w) => { process.stdout.write(w + "\n"); process.exit(0); };
setTimeout(() => say("closed no answer"), ${PROBE_MS - 500}).unref();
const startup = () => {
  const body = Buffer.concat([Buffer.from([0, 3, 0, 0]), Buffer.from("user\0" + user + "\0database\0" + database + "\0\0")]);
  const len = Buffer.alloc(4); len.writeInt32BE(body.length + 4);
  return Buffer.concat([len, body]);
};
const talk = (s) => {
  let buf = Buffer.alloc(0);
  s.on("data", (d) => {
    buf = Buffer.concat([buf, d]);
    if (buf.length < 9) return;
    if (buf[0] === 0x52 && buf.readInt32BE(5) === 0) say("open");
    say(buf[0] === 0x52 ? "closed asks for a credential" : "closed refused");
  });
  s.write(startup());
};
const sock = target.startsWith("/") ? net.connect(target + "/.s.PGSQL." + port) : net.connect(Number(port), target);
sock.on("error", (e) => say("closed " + e.code));
sock.on("connect", () => {
  if (target.startsWith("/")) return talk(sock);
  const ssl = Buffer.alloc(8); ssl.writeInt32BE(8); ssl.writeInt32BE(80877103, 4);
  sock.once("data", (d) => {
    if (d[0] !== 0x53) return talk(sock);
    const t = tls.connect({ socket: sock, rejectUnauthorized: false }, () => talk(t));
    t.on("error", (e) => say("closed " + e.code));
  });
  sock.write(ssl);
});
`;

/** Where the daemon's connections go, as pg resolves the URL (and PGHOST, PGPORT, ...). */
export interface DoorTarget {
  target: string;
  port: number;
  user: string;
  database: string;
}

export function doorTargets(url: string): DoorTarget[] {
  const c = new pg.Client({ connectionString: url });
  const p = c as unknown as { host: string; port: number; user: string; database: string };
  const main = { target: p.host, port: p.port, user: p.user, database: p.database };
  // Through a socket, loopback is another door to the same server (trust on `host` lines).
  return main.target.startsWith("/") ? [main, { ...main, target: "127.0.0.1" }] : [main];
}

/**
 * What the try found: the door it got through (`SOCKET` or `HOST:PORT`), or null; `untried`: why
 * it could not run (uid 65534 cannot execute this node, say), which is not a closed door.
 */
export interface DoorFinding {
  open: string | null;
  untried: string | null;
}

/** Try each door as uid 65534; null when it cannot be tried from here (not root, no setpriv). */
export async function probeDoor(url: string): Promise<DoorFinding | null> {
  if (process.getuid?.() !== 0 || SETPRIV === null) return null;
  let untried: string | null = null;
  for (const d of doorTargets(url)) {
    const said = await tryDoor(SETPRIV, d);
    if (said === "open")
      return {
        open: d.target.startsWith("/") ? `${d.target}/.s.PGSQL.${d.port}` : `${d.target}:${d.port}`,
        untried: null,
      };
    if (!said.startsWith("closed")) untried ??= said;
  }
  return { open: null, untried };
}

/** The try's one line: `open`, `closed WHY`, or why it did not run. Never rejects. */
function tryDoor(setpriv: string, d: DoorTarget): Promise<string> {
  return new Promise((resolve) => {
    const argv = [
      `--reuid=${PROBE_ID}`,
      `--regid=${PROBE_ID}`,
      "--clear-groups",
      "--",
      process.execPath,
      "-e",
      PROBE,
      d.target,
      String(d.port),
      d.user,
      d.database,
    ];
    const child = spawn(setpriv, argv, {
      env: {},
      cwd: "/",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: PROBE_MS,
    });
    let out = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (s: string) => (out += s));
    child.on("error", (e) => resolve(`${setpriv} failed: ${e.message}`));
    child.on("close", (code, signal) =>
      resolve(
        out.trim() ||
          `${process.execPath} as uid ${PROBE_ID} ${signal ? `was killed (${signal})` : `exited ${code}`} (can that uid execute it?)`,
      ),
    );
  });
}

/**
 * The store's door as a root process sees it (null: not root, nothing to say): `open`, what is
 * wrong when any local user can connect as its role without a credential (naming the store
 * without its password, the role and the door the try got through); `untried`, why the try did
 * not run.
 */
export async function checkDoor(
  url: string,
): Promise<{ open: string | null; untried: string | null } | null> {
  const found = await probeDoor(url);
  if (found === null) return null;
  const role = doorTargets(url)[0]?.user ?? "its role";
  return {
    open:
      found.open === null
        ? null
        : `the database of ${describeUrl(url)} lets any local user connect as ${role} without a credential (tried as uid ${PROBE_ID} through ${found.open})`,
    untried:
      found.untried === null
        ? null
        : `cannot tell whether the database of ${describeUrl(url)} lets any local user in: ${found.untried}`,
  };
}
