// The read-only HTTP endpoint: GET / (the status page), /healthz, /status, /metrics.
//
// Safe by default: it binds where the config says (loopback in every example), answers only GET
// and HEAD (405 otherwise), changes nothing, and refuses (403) any request whose Host header is not
// the bound address or localhost, so a web page that rebinds its DNS name to 127.0.0.1 cannot
// read it through the operator's browser. Bound to a wildcard (0.0.0.0, ::) it also accepts the
// machine's own addresses and host name, which is what a remote Prometheus sends.
import fs from "node:fs";
import http from "node:http";
import type net from "node:net";
import os from "node:os";

export interface HttpResponse {
  status: number;
  contentType: string;
  /** Text, or its UTF-8 bytes (a page built in a worker arrives as bytes, not copied again). */
  body: string | Uint8Array;
  /** More headers (a page's Content-Security-Policy). */
  headers?: Readonly<Record<string, string>>;
}

/** What a handler is told of its request: the path as sent (not decoded) and the query. */
export interface HttpRequest {
  path: string;
  query: URLSearchParams;
}

export type Handler = (req: HttpRequest) => HttpResponse | Promise<HttpResponse>;

/**
 * One handler per path; each reads, none writes. A key ending in "/" (other than "/" itself) is a
 * prefix: `/runs/` answers `/runs/12`.
 */
export type Routes = Record<string, Handler>;

/** The handler for `path`: its exact key, else the longest prefix key that leads to it. */
export function routeFor(routes: Routes, path: string): Handler | undefined {
  if (Object.hasOwn(routes, path)) return routes[path];
  let best: string | null = null;
  for (const key of Object.keys(routes)) {
    if (key === "/" || !key.endsWith("/") || !path.startsWith(key) || path === key) continue;
    if (best === null || key.length > best.length) best = key;
  }
  return best === null ? undefined : routes[best];
}

export interface HttpEndpoint {
  /** The address actually bound. */
  host: string;
  port: number;
  close(): Promise<void>;
}

/** A client must send its whole request head within this; checked every 500 ms. */
const HEADERS_TIMEOUT_MS = 2_000;
const IDLE_TIMEOUT_MS = 2_000;
/** How long a request whose head has arrived may wait for its answer (the page's own limit is 30 s). */
const ANSWER_TIMEOUT_MS = 35_000;

const WILDCARDS = new Set(["0.0.0.0", "::", "[::]", ""]);

/** At most this many open connections, and never more than a quarter of the descriptor limit. */
const MAX_CONNECTIONS = 1024;

/** The connection cap for this process: the daemon's other files and jobs keep most descriptors. */
export function connectionCap(limits: string | null = readLimits()): number {
  const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits ?? "")?.[1];
  if (soft === undefined || soft === "unlimited") return MAX_CONNECTIONS;
  return Math.max(8, Math.min(MAX_CONNECTIONS, Math.floor(Number(soft) / 4)));
}

function readLimits(): string | null {
  try {
    return fs.readFileSync("/proc/self/limits", "utf8");
  } catch {
    return null;
  }
}

/**
 * The open connections, oldest first. When `cap` are open, a new one pushes out the oldest that
 * has not sent a whole request yet (an idle or slow client), so clients that keep re-opening
 * connections cannot keep a real request out; a connection whose request is being answered is
 * kept until its response is done. Only when every open one is busy is the new one refused.
 */
export class Connections {
  private readonly open = new Set<net.Socket>();
  /** Requests in progress per connection (pipelined requests overlap). */
  private readonly busy = new WeakMap<net.Socket, number>();

  constructor(private readonly cap: number) {}

  get size(): number {
    return this.open.size;
  }

  /** A new connection: make room for it if needed. */
  add(socket: net.Socket): void {
    if (this.open.size >= this.cap && !this.evictOne()) {
      socket.destroy();
      return;
    }
    this.open.add(socket);
    socket.once("close", () => this.open.delete(socket));
  }

  /** A request on `socket` is in progress until `res` is done (finished, or the socket closed). */
  request(socket: net.Socket, res: http.ServerResponse): void {
    this.busy.set(socket, (this.busy.get(socket) ?? 0) + 1);
    res.once("close", () => this.busy.set(socket, (this.busy.get(socket) ?? 1) - 1));
  }

  private evictOne(): boolean {
    for (const s of this.open) {
      if ((this.busy.get(s) ?? 0) > 0) continue;
      this.open.delete(s);
      s.destroy();
      return true;
    }
    return false;
  }
}

/** The host names a request may name in its Host header, lower case, without brackets. */
export function allowedHosts(bindHost: string, extra: readonly string[] = []): Set<string> {
  const hosts = new Set([
    "localhost",
    "127.0.0.1",
    "::1",
    bindHost.toLowerCase().replace(/^\[(.*)\]$/, "$1"),
  ]);
  for (const h of extra) hosts.add(h.toLowerCase());
  return hosts;
}

/** The machine's addresses and names, for an endpoint bound to every interface. */
export function ownAddresses(): string[] {
  const out = [os.hostname()];
  for (const list of Object.values(os.networkInterfaces()))
    for (const a of list ?? []) out.push(a.address);
  return out;
}

/**
 * Is `header` (`127.0.0.1:9464`, `[::1]:9464`, `localhost`) one of `hosts`, on `port` when it
 * names a port? A missing or malformed header is refused.
 */
export function hostAllowed(
  header: string | undefined,
  hosts: ReadonlySet<string>,
  port: number,
): boolean {
  if (!header) return false;
  const m = /^(?:\[([0-9a-f:.]+)\]|([^:[\]]+))(?::(\d+))?$/i.exec(header.trim());
  if (!m) return false;
  const name = (m[1] ?? m[2] ?? "").toLowerCase().replace(/\.$/, "");
  if (m[3] !== undefined && Number(m[3]) !== port) return false;
  return hosts.has(name);
}

export function startHttp(
  bind: { host: string; port: number },
  routes: Routes,
  log: (line: string) => void,
): Promise<HttpEndpoint> {
  const hosts = allowedHosts(bind.host, WILDCARDS.has(bind.host) ? ownAddresses() : []);
  const conns = new Connections(connectionCap());
  const server = http.createServer(
    // Node checks the header and request timeouts every 30 s by default: 70 idle connections
    // then kept /healthz unanswerable for half a minute. Check often, allow little.
    { connectionsCheckingInterval: 500, headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: 5_000 },
    (req, res) => {
      conns.request(req.socket, res);
      void handle(req, res).catch((e: unknown) => {
        log(`cronvisor: http: ${req.method} ${req.url}: ${(e as Error).message}`);
        if (!res.headersSent)
          send(res, req, {
            status: 500,
            contentType: "text/plain; charset=utf-8",
            body: "internal error\n",
          });
        else res.destroy();
      });
    },
  );

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (!hostAllowed(req.headers.host, hosts, bind.port)) {
      return send(
        res,
        req,
        text(403, "forbidden: the Host header must name this endpoint's address or localhost\n"),
      );
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("Allow", "GET, HEAD");
      return send(
        res,
        req,
        text(405, "method not allowed: this endpoint is read-only (GET, HEAD)\n"),
      );
    }
    const request = parseTarget(req.url ?? "/");
    const route = routeFor(routes, request.path);
    if (!route)
      return send(res, req, text(404, `not found; try ${Object.keys(routes).join(" ")}\n`));
    // An answer may take longer to build (a page of 1,000 jobs) than a silent connection may
    // last: the connection waits for it, then is held to IDLE_TIMEOUT_MS again.
    req.socket.setTimeout(ANSWER_TIMEOUT_MS);
    const answer = await route(request);
    req.socket.setTimeout(IDLE_TIMEOUT_MS);
    send(res, req, answer);
  }

  // Small, read-only answers: no slow clients holding sockets, no request bodies. A connection
  // silent for IDLE_TIMEOUT_MS (one that never sends a byte) is dropped by its own timer. No
  // maxConnections: Node would refuse the newest connection when full, which is the one a real
  // client just opened; Connections pushes out the oldest unfinished one instead.
  server.setTimeout(IDLE_TIMEOUT_MS);
  server.keepAliveTimeout = 5_000;
  server.maxHeadersCount = 50;
  server.on("connection", (socket: net.Socket) => conns.add(socket));

  return new Promise((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) => {
      const why =
        e.code === "EADDRINUSE"
          ? "the address is in use (another cronvisor daemon, or another program?)"
          : e.code === "EADDRNOTAVAIL"
            ? "no interface has this address"
            : e.message;
      reject(new Error(`cannot serve http on ${bind.host}:${bind.port}: ${why}`));
    });
    server.listen({ host: bind.host, port: bind.port, exclusive: true }, () => {
      server.on("error", (e) => log(`cronvisor: http: ${e.message}`));
      const a = server.address();
      const port = typeof a === "object" && a ? a.port : bind.port;
      resolve({
        host: bind.host,
        port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}

/** A request target (`/why/a?at=2026-03-29T02:00Z`) as its path, not decoded, and its query. */
export function parseTarget(url: string): HttpRequest {
  const q = url.indexOf("?");
  return {
    path: q < 0 ? url : url.slice(0, q),
    query: new URLSearchParams(q < 0 ? "" : url.slice(q + 1)),
  };
}

export function text(status: number, body: string): HttpResponse {
  return { status, contentType: "text/plain; charset=utf-8", body };
}

function send(res: http.ServerResponse, req: http.IncomingMessage, r: HttpResponse): void {
  const body =
    typeof r.body === "string"
      ? Buffer.from(r.body, "utf8")
      : Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength);
  res.writeHead(r.status, {
    ...r.headers,
    "Content-Type": r.contentType,
    "Content-Length": body.length,
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
  });
  res.end(req.method === "HEAD" ? undefined : body);
}
