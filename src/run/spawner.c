/*
 * cronvisor's spawner: the small process that forks the daemon's runs (src/run/spawner.ts
 * speaks to it; ARCHITECTURE.md, "The spawner").
 *
 * Why it exists. Node forks in the thread that calls spawn(), copying the page tables of the
 * daemon's whole heap, and waits there until the child has exec'd: about 2 ms of the daemon's
 * CPU a run, and the runs of a tick start one after another behind it. A run also needs someone
 * to wait() for it who outlives the daemon, so that a daemon restarted mid-run still learns the
 * exit status: that was a /bin/sh wrapper per run (one more exec and fork). This process is both:
 * it is a few hundred KiB, so a fork costs little, and it outlives the daemon, waiting for its
 * children and writing each one's exit file, as the wrapper did.
 *
 * The protocol, on stdin (requests) and stdout (events), each frame a little-endian u32 length
 * then that many bytes: a type byte, then NUL-terminated fields.
 *   -> 'S' id nice cwd exitfile argc argv... envc env... [script]   start a run; the bytes after
 *                                                      the last env field go to fd 4 (may be none)
 *   <- 'K' id pid starttime        forked, not yet exec'd (starttime: field 22 of /proc/PID/stat):
 *                                  a daemon that loses the spawner before 'P' or 'F' kills it
 *   <- 'P' id pid starttime        started: the child has exec'd
 *   <- 'F' id errno                could not start (fork, chdir or exec failed)
 *   <- 'O' id stream data          output (stream '1' or '2', then the bytes)
 *   <- 'X' id status               the main process ended (the raw wait status), its group was
 *                                  killed and its exit file written before this is sent
 *   <- 'C' id                      its output is closed (both pipes at EOF, or the drain ran out)
 * The spawner forks a request's child and goes on to the next request without waiting for that
 * child's exec: 'P' or 'F' is sent when the child's exec-error pipe closes or says why, so the
 * answers to several starts may come in another order than the requests. Within one run, 'P'
 * always comes before its output and its 'X'.
 * When stdin closes (the daemon is gone) output is read and dropped, children are still waited
 * for and their exit files written, and the spawner exits once none is left.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define ENV_FD 4
#define MAX_FRAME (64u << 20)

typedef struct {
  char *id;
  pid_t pid;
  int out, err;       /* read ends of the job's stdout and stderr; -1 once closed */
  int script;         /* write end of fd 4 while bytes remain; -1 after */
  int ep;             /* the exec-error pipe until the child has exec'd (or said why not); -1 after */
  int failed;         /* it never became a run ('F' sent): no exit file, no 'X', no 'C' */
  char st[32];        /* its start time, read at the fork (the same after its exec) */
  char *script_buf;
  size_t script_len, script_off;
  char *exit_file;
  int exited;
  int64_t drain_until; /* once exited: when its pipes are closed whatever they hold */
} run_t;

static run_t **runs;
static size_t nruns, capruns;
static int daemon_gone;
static int64_t drain_ms = 1000;
static sigset_t child_mask; /* the mask the spawner was started with, restored in each child */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *what) {
  fprintf(stderr, "cronvisor-spawner: %s: %s\n", what, strerror(errno));
  exit(70);
}

/* One frame to the daemon. After the daemon is gone, nothing: its output has no reader. */
static void send_frame(char type, const char *const *fields, int nfields, const char *data,
                       size_t datalen) {
  if (daemon_gone) return;
  size_t len = 1 + datalen;
  for (int i = 0; i < nfields; i++) len += strlen(fields[i]) + 1;
  char *buf = malloc(4 + len);
  if (!buf) die("malloc");
  uint32_t l = (uint32_t)len;
  memcpy(buf, &l, 4); /* little-endian on every machine cronvisor runs on (x86-64, arm64) */
  size_t off = 4;
  buf[off++] = type;
  for (int i = 0; i < nfields; i++) {
    size_t n = strlen(fields[i]) + 1;
    memcpy(buf + off, fields[i], n);
    off += n;
  }
  if (datalen) memcpy(buf + off, data, datalen);
  off += datalen;
  for (size_t done = 0; done < off;) {
    ssize_t w = write(1, buf + done, off - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) { /* EPIPE: the daemon is gone (SIGPIPE is ignored here) */
      daemon_gone = 1;
      break;
    }
    done += (size_t)w;
  }
  free(buf);
}

static run_t *find_pid(pid_t pid) {
  for (size_t i = 0; i < nruns; i++)
    if (runs[i]->pid == pid && !runs[i]->exited) return runs[i];
  return NULL;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void drop_run(size_t i) {
  run_t *r = runs[i];
  close_fd(&r->out);
  close_fd(&r->err);
  close_fd(&r->script);
  close_fd(&r->ep);
  free(r->script_buf);
  free(r->exit_file);
  free(r->id);
  free(r);
  runs[i] = runs[--nruns];
}

/* Field 22 of /proc/PID/stat: with the pid, the run's identity (src/run/proc.ts). */
static void start_time(pid_t pid, char *out, size_t n) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  snprintf(out, n, "%s", "");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got <= 0) return;
  buf[got] = 0;
  char *p = strrchr(buf, ')');
  if (!p) return;
  p += 2; /* the state, field 3 */
  for (int field = 3; field < 22 && p; field++) {
    p = strchr(p, ' ');
    if (p) p++;
  }
  if (!p) return;
  size_t len = strcspn(p, " ");
  if (len >= n) return;
  memcpy(out, p, len);
  out[len] = 0;
}

/* The status as the exit-file wrapper wrote it: the code, or 128 + the signal. */
static void write_exit_file(const char *file, int status) {
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  /* O_EXCL and O_NOFOLLOW: never through a link or into a file planted where it should be new */
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  char b[16];
  int n = snprintf(b, sizeof b, "%d\n", code);
  if (write(fd, b, (size_t)n) < 0) { /* a full disk: adoption then records it interrupted */ }
  close(fd);
}

static void resolve(run_t *r);

static void reap(void) {
  for (;;) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    /* Look first, reap after: the group is killed while its leader's pid is still ours, so the
       group id cannot have been reused by the time the signal is sent. */
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0) return;
    pid_t pid = si.si_pid;
    run_t *r = find_pid(pid);
    if (r) resolve(r); /* its 'P' (or 'F', and then it is reaped and done) before its 'X' */
    if (r && r->failed) continue;
    /* The exit file first, while the main process is still a zombie: a restarted daemon that
       sees it (not yet reaped) waits for the file (src/daemon/adopt.ts) rather than record the
       run interrupted in the moment between the reap and the write. */
    int status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8
                                          : (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
    if (r) write_exit_file(r->exit_file, status);
    kill(-pid, SIGKILL); /* the run is over: what is left of its group goes with it */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    if (!r) continue;
    r->exited = 1;
    r->drain_until = now_ms() + drain_ms;
    close_fd(&r->script);
    char st[16];
    snprintf(st, sizeof st, "%d", status);
    const char *f[] = {r->id, st};
    send_frame('X', f, 2, NULL, 0);
  }
}

/* A request's fields, in order; NULL when the frame is malformed. */
static const char *field(const char **p, const char *end) {
  const char *s = *p;
  const char *nul = memchr(s, 0, (size_t)(end - s));
  if (!nul) return NULL;
  *p = nul + 1;
  return s;
}

/* Close every descriptor from lo to hi; close_range(2) where the kernel has it (5.9). */
static void close_from(unsigned lo, unsigned hi) {
  if (syscall(SYS_close_range, lo, hi, 0) == 0) return;
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 1 << 20) max = 1 << 20;
  for (long fd = lo; fd <= (long)hi && fd < max; fd++) close((int)fd);
}

/* In the child: fd moved above the ones it sets up; on failure, say why and never exec. */
static int move_high(int fd, int errfd) {
  int h = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  if (h >= 0) return h;
  int why = errno;
  if (write(errfd, &why, sizeof why) < 0) { /* the parent then takes exec as done */ }
  _exit(127);
}

/* A started run, watched from now on: its output pipes, its fd 4 script, its exit file. */
static void add_run(const char *id, const char *exitfile, pid_t pid, const char *st, int out,
                    int err, int ep, int script, const char *p, size_t script_len) {
  run_t *r = calloc(1, sizeof *r);
  if (!r) die("malloc");
  r->id = strdup(id);
  snprintf(r->st, sizeof r->st, "%s", st);
  r->exit_file = strdup(exitfile);
  r->pid = pid;
  r->out = out;
  r->err = err;
  r->ep = ep;
  r->script = script;
  if (script_len > 0) {
    /* Written as the child reads it (poll), never blocking the spawner on a child that won't. */
    r->script_buf = malloc(script_len);
    if (!r->script_buf) die("malloc");
    memcpy(r->script_buf, p, script_len);
    r->script_len = script_len;
    fcntl(r->script, F_SETFL, O_NONBLOCK);
  }
  if (nruns == capruns) {
    capruns = capruns ? capruns * 2 : 64;
    runs = realloc(runs, capruns * sizeof *runs);
    if (!runs) die("realloc");
  }
  runs[nruns++] = r;
}

/* The child has exec'd (its exec-error pipe closed) or said why it could not (errno on it):
   'P' with its pid and start time, or 'F'. Called when the pipe is readable, and before anything
   else of the run is told (output, exit), so that 'P' always comes first: a child that writes or
   exits has got past its exec or written its errno, so the read never blocks. */
static void resolve(run_t *r) {
  if (r->ep < 0) return;
  int en = 0;
  ssize_t got;
  while ((got = read(r->ep, &en, sizeof en)) < 0 && errno == EINTR) {
  }
  close_fd(&r->ep);
  if (got != (ssize_t)sizeof en) en = 0;
  if (en != 0) {
    /* It never became a run: it exits 127 at once, reaped here (reap() skips it from now on). */
    while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR) {
    }
    r->failed = 1;
    r->exited = 1;
    r->drain_until = 0;
    close_fd(&r->out);
    close_fd(&r->err);
    close_fd(&r->script);
    char e[16];
    snprintf(e, sizeof e, "%d", en);
    const char *f[] = {r->id, e};
    send_frame('F', f, 2, NULL, 0);
    return;
  }
  char pid_s[16];
  snprintf(pid_s, sizeof pid_s, "%d", (int)r->pid);
  const char *f[] = {r->id, pid_s, r->st};
  send_frame('P', f, 3, NULL, 0);
}

/* The child, between fork and exec: what Node's spawn(..., { detached: true, cwd, env }) did.
   Never returns: the job's program, or errno on `ep` and exit 127. */
static void exec_child(int nice_v, const char *cwd, char **argv, char **envp, int out, int err,
                       int ep, int sp, int go[2]) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; s++) sigaction(s, &dfl, NULL); /* ignored ones would be inherited */
  sigprocmask(SIG_SETMASK, &child_mask, NULL);
  setsid(); /* its own session and process group: signalled as one */
  setpriority(PRIO_PROCESS, 0, nice_v);
  /* No exec before the spawner has told the daemon this pid ('K'): a spawner killed in between
     leaves nobody who knows of this process, so it ends here (EOF: the spawner is gone). */
  close(go[1]);
  char b;
  ssize_t g;
  while ((g = read(go[0], &b, 1)) < 0 && errno == EINTR) {
  }
  if (g != 1) _exit(127);
  close(go[0]);
  /* Every descriptor the child keeps goes above the ones it sets up first, so that no dup2
     below overwrites another; the exec-error pipe then sits right above ENV_FD. */
  int errfd = move_high(ep, ep);
  int o = move_high(out, errfd), e = move_high(err, errfd);
  int s = sp >= 0 ? move_high(sp, errfd) : -1;
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) goto fail;
  if (s >= 0 && dup2(s, ENV_FD) < 0) goto fail;
  if (dup3(errfd, ENV_FD + 1, O_CLOEXEC) < 0) goto fail;
  errfd = ENV_FD + 1;
  /* Nothing else reaches the job: not even a descriptor the daemon itself inherited without
     close-on-exec from whoever started it (a root process's pipe would reach a user: job). */
  close_from(3, s >= 0 ? ENV_FD - 1 : ENV_FD);
  close_from(ENV_FD + 2, ~0U);
  if (chdir(cwd) < 0) goto fail;
  environ = envp; /* execvp searches the job's PATH, as Node's spawn does */
  execvp(argv[0], argv);
fail:;
  int why = errno;
  if (write(errfd, &why, sizeof why) < 0) { /* the parent then takes exec as done */ }
  _exit(127);
}

static void start(const char *p, const char *end) {
  const char *id = field(&p, end), *nice_s = field(&p, end), *cwd = field(&p, end),
             *exitfile = field(&p, end), *argc_s = field(&p, end);
  if (!argc_s) die("malformed request");
  int argc = atoi(argc_s);
  if (argc < 1 || argc > 100000) die("malformed request");
  char **argv = calloc((size_t)argc + 1, sizeof *argv);
  if (!argv) die("calloc");
  for (int i = 0; i < argc; i++)
    if (!(argv[i] = (char *)field(&p, end))) die("malformed request");
  const char *envc_s = field(&p, end);
  if (!envc_s) die("malformed request");
  int envc = atoi(envc_s);
  if (envc < 0 || envc > 100000) die("malformed request");
  char **envp = calloc((size_t)envc + 1, sizeof *envp);
  if (!envp) die("calloc");
  for (int i = 0; i < envc; i++)
    if (!(envp[i] = (char *)field(&p, end))) die("malformed request");
  size_t script_len = (size_t)(end - p);
  int nice_v = atoi(nice_s);

  int out[2] = {-1, -1}, err[2] = {-1, -1}, ep[2] = {-1, -1}, sp[2] = {-1, -1}, go[2] = {-1, -1};
  pid_t pid = -1;
  int en = 0;
  if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0 ||
      pipe2(go, O_CLOEXEC) < 0 || (script_len > 0 && pipe2(sp, O_CLOEXEC) < 0) ||
      (pid = fork()) < 0)
    en = errno ? errno : EAGAIN;
  if (pid == 0) exec_child(nice_v, cwd, argv, envp, out[1], err[1], ep[1], sp[0], go);
  free(argv);
  free(envp);
  close_fd(&go[0]);
  close_fd(&ep[1]);
  close_fd(&out[1]);
  close_fd(&err[1]);
  close_fd(&sp[0]);
  if (en != 0) {
    close_fd(&go[1]);
    close_fd(&ep[0]);
    close_fd(&out[0]);
    close_fd(&err[0]);
    close_fd(&sp[1]);
    char e[16];
    snprintf(e, sizeof e, "%d", en);
    const char *f[] = {id, e};
    send_frame('F', f, 2, NULL, 0);
    return;
  }

  /* Not waited for here: 'P' (or 'F') is sent once the exec-error pipe says how the exec went
     (resolve), so the next request's fork does not wait behind this child's exec. A tick's runs
     then start side by side, and the spawner does not sleep and wake once per run: under load
     each wake-up waited behind other processes for a CPU, run after run. */
  char pid_s[16], st[32];
  snprintf(pid_s, sizeof pid_s, "%d", (int)pid);
  start_time(pid, st, sizeof st); /* not reaped yet (only reap() does), so still this process */
  const char *f[] = {id, pid_s, st};
  send_frame('K', f, 3, NULL, 0);
  /* Now the child may exec (exec_child waits for this byte; SIGPIPE is ignored here). */
  if (write(go[1], "", 1) < 0) { /* it died already: its exit is reaped as any run's */ }
  close_fd(&go[1]);
  add_run(id, exitfile, pid, st, out[0], err[0], ep[0], sp[1], p, script_len);
}

/* The script for fd 4, as far as the pipe takes it now. */
static void feed_script(run_t *r) {
  while (r->script_off < r->script_len) {
    ssize_t w = write(r->script, r->script_buf + r->script_off, r->script_len - r->script_off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) return;
    if (w < 0) break; /* EPIPE: the run ended without reading it; its exit tells the story */
    r->script_off += (size_t)w;
  }
  close_fd(&r->script);
}

/* A chunk of a job's output to the daemon; 0 at EOF (the pipe is then closed). */
static void relay(run_t *r, int *fd, char stream) {
  static char buf[65536];
  resolve(r); /* 'P' before its first output */
  if (r->failed) return;
  ssize_t n = read(*fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close_fd(fd);
    return;
  }
  char s[2] = {stream, 0};
  const char *f[] = {r->id, s};
  send_frame('O', f, 2, buf, (size_t)n);
}

static char *inbuf;
static size_t inlen, incap;

/* Requests read so far, handled whole; a partial frame waits for the rest. */
static void read_requests(void) {
  if (incap - inlen < 65536) {
    incap = incap ? incap * 2 : 1 << 20;
    inbuf = realloc(inbuf, incap);
    if (!inbuf) die("realloc");
  }
  ssize_t n = read(0, inbuf + inlen, incap - inlen);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    /* The daemon is gone. Its two pipes become /dev/null, so no later pipe takes fd 0 or 1. */
    daemon_gone = 1;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
      dup2(devnull, 0);
      dup2(devnull, 1);
      close(devnull);
    }
    return;
  }
  inlen += (size_t)n;
  size_t off = 0;
  while (inlen - off >= 4) {
    uint32_t len;
    memcpy(&len, inbuf + off, 4);
    if (len == 0 || len > MAX_FRAME) die("malformed request");
    if (inlen - off - 4 < len) {
      if (len + 4 > incap) {
        incap = len + 4 + 65536;
        char *grown = malloc(incap);
        if (!grown) die("malloc");
        memcpy(grown, inbuf + off, inlen - off);
        free(inbuf);
        inbuf = grown;
        inlen -= off;
        off = 0;
      }
      break;
    }
    const char *frame = inbuf + off + 4;
    if (frame[0] == 'S') start(frame + 1, frame + len);
    else die("unknown request");
    off += 4 + len;
  }
  memmove(inbuf, inbuf + off, inlen - off);
  inlen -= off;
}

int main(int argc, char **argv) {
  if (argc > 1) drain_ms = atoll(argv[1]);
  signal(SIGPIPE, SIG_IGN);
  /* Ctrl-C in the daemon's terminal, or a signal to its group, must not take the runs' waiter. */
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  /* Nothing the daemon inherited from whoever started it is held here: a pipe a harness waits
     on would stay open as long as this process waits for runs, after the daemon is gone. */
  close_from(3, ~0U);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &chld, &child_mask) < 0) die("sigprocmask");
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) die("signalfd");
  struct pollfd *pfds = NULL;
  run_t **owner = NULL;
  size_t cap = 0;
  for (;;) {
    size_t need = 2 + nruns * 4;
    if (need > cap) {
      cap = need * 2;
      pfds = realloc(pfds, cap * sizeof *pfds);
      owner = realloc(owner, cap * sizeof *owner);
      if (!pfds || !owner) die("realloc");
    }
    size_t n = 0;
    pfds[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
    pfds[n++] = (struct pollfd){.fd = daemon_gone ? -1 : 0, .events = POLLIN};
    int64_t now = now_ms(), wait = -1;
    for (size_t i = 0; i < nruns;) {
      run_t *r = runs[i];
      if (r->exited && ((r->out < 0 && r->err < 0) || now >= r->drain_until)) {
        const char *f[] = {r->id};
        if (!r->failed) send_frame('C', f, 1, NULL, 0);
        drop_run(i);
        continue;
      }
      if (r->exited) {
        int64_t left = r->drain_until - now;
        if (wait < 0 || left < wait) wait = left;
      }
      int fds[4] = {r->ep, r->out, r->err, r->script};
      for (int k = 0; k < 4; k++) {
        if (fds[k] < 0) continue;
        owner[n] = r;
        pfds[n++] = (struct pollfd){.fd = fds[k], .events = k == 3 ? POLLOUT : POLLIN};
      }
      i++;
    }
    /* Here, after the runs that ended were dropped: before, a last run's end went unnoticed. */
    if (daemon_gone && nruns == 0) return 0;
    int got = poll(pfds, n, (int)wait);
    if (got < 0 && errno != EINTR) die("poll");
    if (got <= 0) continue;
    if (pfds[0].revents) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) > 0) {
      }
      reap();
    }
    for (size_t k = 2; k < n; k++) {
      if (!pfds[k].revents) continue;
      run_t *r = owner[k];
      if (pfds[k].fd == r->ep) resolve(r);
      else if (pfds[k].fd == r->out) relay(r, &r->out, '1');
      else if (pfds[k].fd == r->err) relay(r, &r->err, '2');
      else if (pfds[k].fd == r->script) feed_script(r);
    }
    /* Requests last: a start may realloc runs, which the owners above point into. */
    if (pfds[1].revents) read_requests();
  }
}
