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
 *   -> 'S' id nice cwd exitfile pidfile leftovers nofile memory cpu tasks cgroup argc argv...
 *      envc env... [script]        start a run; the bytes after the last env field go to fd 4
 *                                  (may be none). leftovers: 'k' kill, 'w' wait, 'p' keep (what
 *                                  is left of the run when its main process exits); nofile: the
 *                                  run's soft RLIMIT_NOFILE (0: the system's usual 1024); memory
 *                                  (bytes), cpu (percent of one CPU), tasks: its cgroup's
 *                                  memory.max, cpu.max and pids.max (0: none); cgroup: its
 *                                  job's cgroup, used and kept for the job's next run
 *                                  ("job-NAME"; without limits only), or empty: BASE/run-ID
 *   -> 'R' path                    a pruned log, renamed next to the exit files: an exit file
 *                                  ahead if no one holds it open, else removed (recycle)
 *   -> 'D' name                    cgroup.kill was written to the job cgroup `name` (the daemon's
 *                                  timeout or stop): it is never cloned into again (pool_killed)
 *   <- 'K' id pid starttime        forked, not yet exec'd (starttime: field 22 of /proc/PID/stat):
 *                                  a daemon that loses the spawner before 'P' or 'F' kills it
 *   <- 'P' id pid starttime        started: the child has exec'd
 *   <- 'F' id errno                could not start (fork, chdir or exec failed)
 *   <- 'O' id stream data          output (stream '1' or '2', then the bytes)
 *   <- 'X' id status left cpu_us peak oom
 *                                  the run is over: its main process ended (the raw wait status,
 *                                  its exit file written) and nothing of it is left in its cgroup
 *                                  (or group): `left` processes were killed ('k'), waited for
 *                                  ('w') or moved out to keep running ('p'), -1 if not counted;
 *                                  cpu_us its CPU time, peak its peak memory in bytes, oom the
 *                                  cgroup's OOM kills (-1 unknown)
 *   <- 'C' id                      its output is closed (both pipes at EOF, or the drain ran out)
 * The spawner forks a request's child and goes on to the next request without waiting for that
 * child's exec: 'P' or 'F' is sent when the child's exec-error pipe closes or says why, so the
 * answers to several starts may come in another order than the requests. Within one run, 'P'
 * always comes before its output and its 'X'.
 * When stdin closes (the daemon is gone) output is read and dropped, children are still waited
 * for and their exit files written, and the spawner exits once none is left.
 *
 * Containment (ARCHITECTURE.md, "Containment"). Started with a cgroup base directory (argv[2]),
 * every run goes into a cgroup, BASE/run-ID or its job's kept BASE/job-NAME (pool_take), which
 * its child is born in (clone3's CLONE_INTO_CGROUP) or, on kernels without it, enters before its
 * exec (cgroup.procs). A cgroup that cgroup.kill was written to is never cloned into (the kernel
 * SIGKILLs such a child at birth): a killed job cgroup is removed and made anew. A process that
 * leaves the run's process group (setsid, a double fork) stays in it, so the run (and its lock)
 * lasts until nothing of it is left, and a restarted daemon finds it by the run's id or job
 * (src/core/proc.ts, runCgroupsOf).
 * Without one, the run's process group is what is waited for and killed. Either way the pid
 * file (pid and start time) is written before the child may exec, so a daemon killed before it
 * recorded the pid still finds the run; at the run's end it is renamed away to serve a later
 * run's (pid_spare_put), so that no file is created or freed per run for it, and exit files are
 * made ahead while there is nothing else to do (fresh_make). The spawner is a child subreaper:
 * escaped descendants are reparented to it and reaped here, and wait4 adds their CPU to no run
 * (a cgroup counts it).
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
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
  int go;             /* cloned into its cgroup: the go pipe's read end until the exec is known */
  char *req;          /* cloned into its cgroup: its request, until the exec is known */
  size_t req_len;
  char st[32];        /* its start time, read at the fork (the same after its exec) */
  char *script_buf;
  size_t script_len, script_off;
  char *exit_file;
  char *pid_file;     /* put away as a spare once the run is over (pid_spare_put); NULL after */
  char leftovers;      /* 'k', 'w' or 'p' */
  int cg;              /* the run's cgroup directory, or -1 (process-group containment) */
  struct pooled *job_cg; /* its job's reused cgroup (cg is then that one's), or NULL */
  int exited;          /* its main process has ended and been reaped */
  int settled;         /* nothing of it is left: 'X' sent */
  int status;          /* the main process's raw wait status */
  long left;           /* leftovers counted at the main process's end (-1: not counted) */
  int empty;           /* its cgroup was empty when the main process ended: it stays so */
  struct rusage ru;    /* the main process's and its waited-for descendants' */
  int64_t drain_until; /* once exited: when its pipes are closed whatever they hold */
} run_t;

static run_t **runs;
static size_t nruns, capruns;
static int daemon_gone;
static int64_t drain_ms = 1000;
static sigset_t child_mask; /* the mask the spawner was started with, restored in each child */
static int cg_base = -1;    /* the cgroup base directory (argv[2]), or -1: process groups */
static const char *cg_base_path;
/* How often a run whose leftovers are waited for (or killed) is checked for emptiness. */
#define SETTLE_POLL_MS 20

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
  close_fd(&r->cg);
  close_fd(&r->go);
  free(r->req);
  free(r->script_buf);
  free(r->exit_file);
  free(r->pid_file);
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

/* Is a SIGKILL pending for the (unreaped) process as a whole? /proc/PID/status's ShdPnd: a signal
   to the process stays there until it is reaped, even once it is dying or a zombie (the stat
   file's field 31 is the thread's own, cleared as it starts to die). */
static int sigkill_pending(pid_t pid) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got <= 0) return 0;
  buf[got] = 0;
  const char *p = strstr(buf, "\nShdPnd:");
  return p && (strtoull(p + 8, NULL, 16) & (1ULL << (SIGKILL - 1)));
}

static int fresh_write(const char *file, const char *b, size_t n);
static int exits_written;

/* `b` written from the start of `spare` (a regular file with one link; empty when `empty`) and
   the spare renamed to `file`, replacing what lies there (rename(2) never follows a link
   planted there); else the spare is removed. 1 when it is in place. */
static int place_spare(const char *spare, const char *file, const char *b, size_t n, int empty) {
  int fd = open(spare, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat s;
  int ok = fd >= 0 && fstat(fd, &s) == 0 && S_ISREG(s.st_mode) && s.st_nlink == 1 &&
           (!empty || s.st_size == 0) && pwrite(fd, b, n, 0) == (ssize_t)n;
  if (fd >= 0) close(fd);
  ok = ok && rename(spare, file) == 0;
  if (!ok) unlink(spare); /* ENOENT: a daemon's start cleared it */
  return ok;
}

/* `file` created with `b` in it. O_EXCL and O_NOFOLLOW: never through a link or into a file
   planted where it should be new. A failed write (a full disk) leaves it short: the exit file
   then reads as none (adoption records the run interrupted), the pid file as none (the daemon
   records the pid itself). */
static void create_new(const char *file, const char *b, size_t n) {
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  if (write(fd, b, n) < 0) { /* see above */ }
  close(fd);
} /* how many exit files this spawner wrote, up to 2 (fresh_make) */

/* The status as the exit-file wrapper wrote it: the code, or 128 + the signal. Written into a
   file made beforehand while this process had nothing else to do (fresh_make) and renamed into
   place, whole, where there is one; else created. */
static void write_exit_file(const char *file, int status) {
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  char b[16];
  int n = snprintf(b, sizeof b, "%d\n", code);
  exits_written += exits_written < 2;
  if (!fresh_write(file, b, (size_t)n)) create_new(file, b, (size_t)n);
}

/* Pid files put away at their runs' ends, each to serve a later run's pid file (write_pid_file):
   creating a file was about half this process's CPU on ext4 without a journal (`ext4_create` ->
   `recently_deleted`: every create scans the inodes freed in its block group in the last ~30 s,
   and each run freed one, its pid file, removed after its end). Renamed in and out of place,
   the same few inodes serve every run. Only pid files: this process writes them, and the daemon
   only reads one (adoption) while its run lives. A spare is named `sPID-N.spare` next to the
   pid files, so that a daemon's start clears those a killed spawner left (spare.ts,
   clearSpares); daemons name theirs with a digit first, so the two never meet. */
typedef struct {
  char *path; /* the spare's name */
  size_t dirlen; /* the length of its directory, slash included: it serves pid files there only */
} pid_spare_t;
#define PID_SPARES_MAX 1024
static pid_spare_t pid_spares[PID_SPARES_MAX];
static size_t npid_spares;
static unsigned long pid_spare_seq;

static size_t dir_len(const char *file) {
  const char *slash = strrchr(file, '/');
  return slash ? (size_t)(slash - file) + 1 : 0;
}

/* A pid file whose run is over (or never started): kept as a spare, or removed past the cap. */
static void pid_spare_put(const char *file) {
  if (!file || !file[0]) return;
  size_t dl = dir_len(file);
  if (npid_spares < PID_SPARES_MAX) {
    char *spare = malloc(dl + 48);
    if (!spare) die("malloc");
    memcpy(spare, file, dl);
    snprintf(spare + dl, 48, "s%d-%lu.spare", (int)getpid(), pid_spare_seq++);
    /* rename(2) never follows either name; ENOENT: there was none (a full disk, a failed write) */
    if (rename(file, spare) == 0) {
      pid_spares[npid_spares++] = (pid_spare_t){spare, dl};
      return;
    }
    free(spare);
  }
  unlink(file);
}

/* Empty files made ahead for exit files (fresh_make), in the directory of the last exit file
   written (fresh_dir). Every run's exit file must be an inode no reader holds, as it goes on to
   be a later run's log (spare.ts): a pruned log no one has open (recycle) or a new one. Made at
   the reap, a new one was a quarter of this process's CPU (the same
   `recently_deleted` scan), between one run's end and the next run's start. Made here while
   poll() finds nothing to do (between the ticks of per-second jobs, or between two events), up
   to fresh_target, which doubles whenever an exit file found none; only by a spawner that has
   written two exit files (a daemon's: `cronvisor run`'s one run makes none ahead, which its
   exit would only remove). Named as the pid-file spares; a pid file with no spare of its own
   takes one too. */
#define FRESH_MAX 1024
static pid_spare_t fresh[FRESH_MAX];
static size_t nfresh, fresh_target = 8;
static char *fresh_dir;
/* Pruned logs given back (recycle), emptied, used before any made ahead. Kept past
   fresh_target, up to this: turned away there, each tick's made-ahead files (made while the
   tick's recycled logs were still to come) were matched by as many recycled ones removed, a
   create and a free per run again. */
#define RECYCLED_MAX 4096
static pid_spare_t recycled[RECYCLED_MAX];
static size_t nrecycled;

/* Every file of a pool removed. */
static void pool_clear(pid_spare_t *pool, size_t *n) {
  for (size_t i = 0; i < *n; i++) {
    unlink(pool[i].path);
    free(pool[i].path);
  }
  *n = 0;
}

/* The pool's newest file that can be, filled with `b` and renamed to `file`: 1 when one was. */
static int place_from(pid_spare_t *pool, size_t *n, const char *file, const char *b, size_t len) {
  while (*n > 0) {
    pid_spare_t sp = pool[--*n];
    int ok = place_spare(sp.path, file, b, len, 1);
    free(sp.path);
    if (ok) return 1;
  }
  return 0;
}

static int fresh_write(const char *file, const char *b, size_t n) {
  size_t dl = dir_len(file);
  if (!fresh_dir || strlen(fresh_dir) != dl || strncmp(fresh_dir, file, dl) != 0) {
    free(fresh_dir);
    pool_clear(fresh, &nfresh);
    pool_clear(recycled, &nrecycled);
    fresh_dir = strndup(file, dl);
    if (!fresh_dir) die("strndup");
  }
  if (nfresh + nrecycled == 0 && fresh_target < FRESH_MAX && exits_written >= 2)
    fresh_target *= 2;
  return place_from(recycled, &nrecycled, file, b, n) || place_from(fresh, &nfresh, file, b, n);
}

/* One more empty file ahead; 0 when none is wanted or it cannot be made (then none until the
   next exit file says where). */
static int fresh_make(void) {
  if (!fresh_dir || nfresh + nrecycled >= fresh_target || daemon_gone || exits_written < 2)
    return 0;
  size_t dl = strlen(fresh_dir);
  char *name = malloc(dl + 48);
  if (!name) die("malloc");
  memcpy(name, fresh_dir, dl);
  snprintf(name + dl, 48, "s%d-%lu.spare", (int)getpid(), pid_spare_seq++);
  int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    free(name);
    free(fresh_dir);
    fresh_dir = NULL;
    return 0;
  }
  close(fd);
  fresh[nfresh++] = (pid_spare_t){name, dl};
  return 1;
}

/* A pruned log the daemon renamed to `path` (a spare's name next to the exit files, 'R'): kept,
   emptied, for a later exit file when no one else has it open, else removed. Its run is
   over and its name gone, so only a reader that opened it before (`logs --follow`, the page)
   can still hold it, and such a reader must never see a later run's output through it: a write
   lease is granted only while no other open file of the inode exists, in any process (fcntl(2),
   F_SETLEASE), and once its name is gone no new one can be opened. So an inode serves run after
   run (exit file, log, pruned, exit file again) and none is created or freed per run: creating
   one was what was left of this process's per-run ext4 cost (`recently_deleted`, above). */
static void recycle(const char *path) {
  size_t dl = dir_len(path);
  int fd = -1, ok = fresh_dir && nrecycled < RECYCLED_MAX && strlen(fresh_dir) == dl &&
                    strncmp(fresh_dir, path, dl) == 0;
  if (ok) fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat s;
  ok = ok && fd >= 0 && fstat(fd, &s) == 0 && S_ISREG(s.st_mode) && s.st_nlink == 1 &&
       s.st_uid == geteuid() && fcntl(fd, F_SETLEASE, F_WRLCK) == 0;
  if (ok) {
    fcntl(fd, F_SETLEASE, F_UNLCK);
    ok = ftruncate(fd, 0) == 0;
  }
  if (fd >= 0) close(fd);
  char *kept = ok ? strdup(path) : NULL;
  if (!kept) {
    unlink(path);
    return;
  }
  recycled[nrecycled++] = (pid_spare_t){kept, dl};
}

/* Once the daemon is gone and its runs with it, the spares serve no one. */
static void pid_spares_clear(void) {
  pool_clear(pid_spares, &npid_spares);
  pool_clear(fresh, &nfresh);
  pool_clear(recycled, &nrecycled);
}

/* The run's pid and start time, written before its child may exec: a daemon killed before it
   recorded them finds the run by this file (src/daemon/adopt.ts). Padded to a fixed width, so a
   spare's earlier text is overwritten whole without emptying it first; written into a spare and
   renamed into place where there is one (replacing whatever lies at the path: a stale file of an
   earlier start of the run), else created. */
static void write_pid_file(const char *file, const char *pid, const char *st) {
  if (!file[0]) return;
  char b[64];
  snprintf(b, sizeof b, "%-63s", "");
  int n = snprintf(b, sizeof b, "%s %s", pid, st);
  if (n < 0 || n >= 63) return;
  b[n] = ' ';
  b[63] = '\n';
  size_t dl = dir_len(file);
  for (size_t i = npid_spares; i-- > 0;) {
    pid_spare_t sp = pid_spares[i];
    if (sp.dirlen != dl || strncmp(sp.path, file, dl) != 0) continue;
    pid_spares[i] = pid_spares[--npid_spares];
    int ok = place_spare(sp.path, file, b, sizeof b, 0);
    free(sp.path);
    if (ok) return;
    break;
  }
  if (!fresh_write(file, b, sizeof b)) create_new(file, b, sizeof b);
}

static void resolve(run_t *r);
static void start(const char *p, const char *end, int retry);

/* A small file of a cgroup directory, NUL-terminated; -1 when it cannot be read (absent). */
static ssize_t read_at(int dir, const char *name, char *buf, size_t n) {
  int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t got = read(fd, buf, n - 1);
  close(fd);
  if (got < 0) return -1;
  buf[got] = 0;
  return got;
}

/* clone3(2)'s arguments as the kernel's ABI lays them out (CLONE_ARGS_SIZE_VER2, Linux 5.7): our
   own copy, so that the build does not depend on the headers' age. */
struct cv_clone_args {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
      set_tid_size, cgroup;
};
#define CV_CLONE_INTO_CGROUP 0x200000000ULL

/* A child born in the cgroup `cg` (clone3's CLONE_INTO_CGROUP): like fork(), and errno ENOSYS,
   E2BIG or EINVAL where the kernel has no such thing (before 5.7). */
static pid_t fork_into(int cg) {
  struct cv_clone_args a;
  memset(&a, 0, sizeof a);
  a.flags = CV_CLONE_INTO_CGROUP;
  a.exit_signal = SIGCHLD;
  a.cgroup = (uint64_t)cg;
  return (pid_t)syscall(SYS_clone3, &a, sizeof a);
}

static int write_at(int dir, const char *name, const char *text) {
  int fd = openat(dir, name, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = strlen(text);
  ssize_t w = write(fd, text, len);
  int en = errno;
  close(fd);
  errno = en;
  return w == (ssize_t)len ? 0 : -1;
}

/* The number after `key` in a flat-keyed cgroup file (cpu.stat, memory.events), or -1. */
static long long keyed(int dir, const char *file, const char *key) {
  char b[4096];
  if (read_at(dir, file, b, sizeof b) < 0) return -1;
  size_t klen = strlen(key);
  for (char *p = b; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (strncmp(p, key, klen) == 0 && p[klen] == ' ') return atoll(p + klen + 1);
  return -1;
}

/* A job's cgroup, kept empty after its run for the job's next one (the request's `cgroup`:
   "job-NAME"). Making a cgroup and moving the first process into it is the kernel's dearest part
   of containment: 110 of the 120 us a run's cgroup cost in a C loop on this machine's cgroup2
   mount, against 45 us for a kept one (BENCHMARKS.md, "containment"). One run of a job at a time
   holds the job's lock, so what is in a job's cgroup is always its running run's. cgroup v2
   refuses renames (EPERM), so a kept cgroup cannot serve another job. */
typedef struct pooled {
  char *name;
  int fd;
  int busy;          /* a run is in it */
  int clean;         /* made by this spawner, never killed since: a child may be cloned into it */
  long long cpu_base; /* its cpu.stat usage_usec when its last run ended (or when found) */
  int64_t idle_since;
  struct pooled *next;
} pooled_t;
#define POOL_BUCKETS 4096
/* How long a kept cgroup waits for its job's next run: a job started more often reuses it. */
#define POOL_IDLE_MS 10000
static pooled_t *pool[POOL_BUCKETS];
static int pool_off;          /* the memory controller is on: memory.peak cannot be reset */
static int clone_into = 1;    /* children are born in their cgroup (fork_into); 0: they move */
static int64_t pool_sweep_at; /* when the oldest idle kept cgroup expires; 0: none idle */

static pooled_t **pool_slot(const char *name) {
  uint32_t h = 2166136261u;
  for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 16777619u;
  pooled_t **pp = &pool[h % POOL_BUCKETS];
  while (*pp && strcmp((*pp)->name, name) != 0) pp = &(*pp)->next;
  return pp;
}

/* The job's kept cgroup for a new run, made if need be; NULL when it cannot be used (in use, or
   populated by something this spawner does not know: the run then gets a cgroup of its own). */
static pooled_t *pool_take(const char *name) {
  pooled_t **pp = pool_slot(name), *e = *pp;
  if (e) {
    if (e->busy) return NULL;
    e->busy = 1;
    return e;
  }
  /* One left by an earlier spawner is made anew: whether cgroup.kill was ever written to it
     cannot be read back, and a child cloned into such a cgroup is SIGKILLed at birth (Linux 6.18:
     the fork compares the kill counts of the parent's cgroup and the child's). rmdir fails on a
     populated one: a run this spawner did not start. */
  int fresh = mkdirat(cg_base, name, 0755) == 0;
  if (!fresh && (errno != EEXIST || unlinkat(cg_base, name, AT_REMOVEDIR) < 0 ||
                 mkdirat(cg_base, name, 0755) < 0))
    return NULL;
  int fd = openat(cg_base, name, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  e = calloc(1, sizeof *e);
  if (!e || !(e->name = strdup(name))) die("malloc");
  e->fd = fd;
  e->busy = 1;
  e->clean = 1;
  *pp = e;
  return e;
}

/* A kept cgroup not in use is removed (made anew by the job's next run). */
static void pool_drop(pooled_t *e) {
  pooled_t **pp = pool_slot(e->name);
  if (*pp != e) return;
  *pp = e->next;
  close(e->fd);
  if (unlinkat(cg_base, e->name, AT_REMOVEDIR) < 0) { /* the daemon's sweep removes it */ }
  free(e->name);
  free(e);
}

/* cgroup.kill was written to a kept cgroup: no child is ever cloned into it again (it would be
   SIGKILLed at birth). One in use goes when its run is over, an idle one now. */
static void pool_killed(const char *name) {
  pooled_t *e = *pool_slot(name);
  if (!e) return;
  e->clean = 0;
  if (!e->busy) pool_drop(e);
}

/* A run is over and its job's cgroup empty: kept for the job's next run. */
static void pool_give_back(pooled_t *e) {
  e->busy = 0;
  e->idle_since = now_ms();
  if (pool_sweep_at == 0) pool_sweep_at = e->idle_since + POOL_IDLE_MS;
}

/* Kept cgroups idle too long are removed. Only while the daemon is there: after, a new daemon's
   spawner may have made a cgroup of the same name, which a removal by name would take. */
static void pool_sweep(int64_t now) {
  if (pool_sweep_at == 0 || now < pool_sweep_at || daemon_gone) return;
  pool_sweep_at = 0;
  for (int i = 0; i < POOL_BUCKETS; i++)
    for (pooled_t **pp = &pool[i]; *pp;) {
      pooled_t *e = *pp;
      if (!e->busy && now - e->idle_since >= POOL_IDLE_MS) {
        close(e->fd);
        if (unlinkat(cg_base, e->name, AT_REMOVEDIR) < 0) { /* the daemon's sweep removes it */ }
        *pp = e->next;
        free(e->name);
        free(e);
        continue;
      }
      if (!e->busy && (pool_sweep_at == 0 || e->idle_since + POOL_IDLE_MS < pool_sweep_at))
        pool_sweep_at = e->idle_since + POOL_IDLE_MS;
      pp = &e->next;
    }
}

/* The pids in the run's cgroup but `skip`: each sent `sig` (0: none) and, with `to` >= 0,
   moved into that cgroup. How many; -1 if the list cannot be read. */
static long cg_pids(run_t *r, pid_t skip, int sig, int to) {
  int fd = openat(r->cg, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return -1;
  }
  long n = 0, pid;
  while (fscanf(f, "%ld", &pid) == 1) {
    if (pid == skip) continue;
    n++;
    if (sig) kill((pid_t)pid, sig);
    if (to >= 0) {
      char b[24];
      snprintf(b, sizeof b, "%ld", pid);
      if (write_at(to, "cgroup.procs", b) < 0) { /* it exited meanwhile */ }
    }
  }
  fclose(f);
  return n;
}

/* Everything in the run's cgroup, SIGKILLed at once (cgroup.kill, Linux 5.14), else one by one. */
static void kill_cgroup(run_t *r) {
  if (r->job_cg) r->job_cg->clean = 0;
  if (write_at(r->cg, "cgroup.kill", "1") < 0) cg_pids(r, 0, SIGKILL, -1);
}

/* Is anything of the run left that its end waits for? Its cgroup's processes; without one, its
   process group, waited for only with `leftovers: wait` (killed or kept otherwise). */
static int run_populated(run_t *r) {
  if (r->cg >= 0) {
    char b[256];
    if (read_at(r->cg, "cgroup.events", b, sizeof b) < 0) return 0;
    const char *p = strstr(b, "populated ");
    return p && p[10] == '1';
  }
  if (r->leftovers != 'w') return 0;
  return kill(-r->pid, 0) == 0 || errno == EPERM;
}

/* The main process has ended (still a zombie, so its group id is ours): what is left of the run
   is counted, then killed, left to finish, or moved out to a kept cgroup of its own. */
static void leftovers(run_t *r) {
  if (r->cg < 0) {
    r->left = -1; /* a process group's escapees cannot be counted, nor found */
    if (r->leftovers == 'k') kill(-r->pid, SIGKILL);
    return;
  }
  /* The usual case, nothing left: the kernel's `populated` says so without listing the cgroup. */
  if (!run_populated(r)) {
    r->left = 0;
    r->empty = 1;
    return;
  }
  r->left = cg_pids(r, r->pid, 0, -1);
  if (r->left <= 0) return;
  if (r->leftovers == 'k') kill_cgroup(r);
  if (r->leftovers != 'p') return;
  char name[64];
  snprintf(name, sizeof name, "kept-%s", r->id);
  if (mkdirat(cg_base, name, 0755) < 0 && errno != EEXIST) {
    kill_cgroup(r); /* nowhere to keep them outside the lock: the lock wins */
    return;
  }
  int kept = openat(cg_base, name, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
  if (kept < 0) {
    kill_cgroup(r);
    return;
  }
  /* Forks between the listing and the move are caught by the next rounds. */
  for (int round = 0; round < 5 && cg_pids(r, r->pid, 0, kept) > 0; round++) {
  }
  close(kept);
}

/* Nothing of an ended run is left: its accounting, its cgroup removed, 'X'. */
static void settle(run_t *r) {
  long long cpu_us = (long long)r->ru.ru_utime.tv_sec * 1000000 + r->ru.ru_utime.tv_usec +
                     (long long)r->ru.ru_stime.tv_sec * 1000000 + r->ru.ru_stime.tv_usec;
  long long peak = (long long)r->ru.ru_maxrss * 1024, oom = -1;
  if (r->cg >= 0) {
    /* The cgroup's figures count every process the run had, escaped ones too; a kept job
       cgroup's count goes on from its earlier runs'. */
    long long v = keyed(r->cg, "cpu.stat", "usage_usec");
    if (v >= 0 && r->job_cg) {
      long long before = r->job_cg->cpu_base;
      r->job_cg->cpu_base = v;
      v = v >= before ? v - before : -1;
    }
    if (v >= 0) cpu_us = v;
    /* Without the memory controller these files are absent: not looked for again. */
    static int no_memory = 0;
    char b[64];
    if (!no_memory && read_at(r->cg, "memory.peak", b, sizeof b) > 0) {
      peak = atoll(b);
      oom = keyed(r->cg, "memory.events", "oom_kill");
    } else {
      no_memory = 1;
    }
    if (r->job_cg) {
      /* the fd is the pool's; a killed one is not kept (pool_killed) */
      if (r->job_cg->clean) pool_give_back(r->job_cg);
      else pool_drop(r->job_cg);
      r->job_cg = NULL;
      r->cg = -1;
    } else {
      close_fd(&r->cg);
      char name[64];
      snprintf(name, sizeof name, "run-%s", r->id);
      if (unlinkat(cg_base, name, AT_REMOVEDIR) < 0) { /* a later daemon's sweep removes it */ }
    }
  }
  /* Nothing of the run is left and its exit file is written: no one looks for it by its pid file
     any more (adoption reads one only for a running run). */
  pid_spare_put(r->pid_file);
  free(r->pid_file);
  r->pid_file = NULL;
  r->settled = 1;
  r->drain_until = now_ms() + drain_ms;
  char st[16], left[24], cpu[24], pk[24], om[24];
  snprintf(st, sizeof st, "%d", r->status);
  snprintf(left, sizeof left, "%ld", r->left);
  snprintf(cpu, sizeof cpu, "%lld", cpu_us);
  snprintf(pk, sizeof pk, "%lld", peak);
  snprintf(om, sizeof om, "%lld", oom);
  const char *f[] = {r->id, st, left, cpu, pk, om};
  send_frame('X', f, 6, NULL, 0);
}

/* An ended run whose leftovers are being killed or waited for: settled once none is left. */
static void try_settle(run_t *r) {
  if (!r->exited || r->settled || r->failed) return;
  if (r->empty || !run_populated(r)) return settle(r);
  if (r->leftovers == 'k' && r->cg >= 0) kill_cgroup(r); /* forked after the first kill */
}

static void reap(void) {
  for (;;) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    /* Look first, reap after: what is left of the run is dealt with while its leader's pid is
       still ours, so the group id cannot have been reused by the time the signal is sent. */
    if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0) return;
    pid_t pid = si.si_pid;
    run_t *r = find_pid(pid);
    if (r) resolve(r); /* its 'P' (or 'F', and then it is reaped and done) before its 'X' */
    if (r && r->failed) continue;
    if (!r) {
      /* A run's escaped descendant, reparented here (the spawner is a subreaper): reaped. */
      while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
      }
      continue;
    }
    /* The exit file first, while the main process is still a zombie: a restarted daemon that
       sees it (not yet reaped) waits for the file (src/daemon/adopt.ts) rather than record the
       run interrupted in the moment between the reap and the write. */
    int status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8
                                          : (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
    write_exit_file(r->exit_file, status);
    leftovers(r);
    while (wait4(pid, NULL, 0, &r->ru) < 0 && errno == EINTR) {
    }
    r->exited = 1;
    r->status = status;
    close_fd(&r->script);
    try_settle(r);
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
static void add_run(const char *id, const char *exitfile, const char *pidfile, char left, int cg,
                    pid_t pid, const char *st, int out, int err, int ep, int script,
                    const char *p, size_t script_len) {
  run_t *r = calloc(1, sizeof *r);
  if (!r) die("malloc");
  r->id = strdup(id);
  snprintf(r->st, sizeof r->st, "%s", st);
  r->exit_file = strdup(exitfile);
  r->pid_file = pidfile[0] ? strdup(pidfile) : NULL;
  r->leftovers = left;
  r->cg = cg;
  r->left = -1;
  r->pid = pid;
  r->out = out;
  r->err = err;
  r->ep = ep;
  r->script = script;
  r->go = -1;
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

/* A run that never became one is done with its cgroup (its process is reaped, so it is empty):
   the job's kept one goes back to the pool (a killed one is dropped), its own is removed. */
static void release_cg(run_t *r) {
  if (r->job_cg) {
    long long v = keyed(r->cg, "cpu.stat", "usage_usec");
    if (v >= 0) r->job_cg->cpu_base = v; /* the next run counts from here */
    if (r->job_cg->clean) pool_give_back(r->job_cg);
    else pool_drop(r->job_cg);
    r->job_cg = NULL;
    r->cg = -1;
  } else if (r->cg >= 0) {
    close_fd(&r->cg);
    char name[64];
    snprintf(name, sizeof name, "run-%s", r->id);
    if (unlinkat(cg_base, name, AT_REMOVEDIR) < 0) { /* a later daemon's sweep removes it */ }
  }
}

/* The safety net behind start()'s check at the fork: a child cloned into its cgroup that died of
   SIGKILL without reading its go byte (so before its exec; its exec-error pipe at EOF) was killed
   by the kernel, not by anyone who knew of it. It is reaped, its cgroup dropped, and the run
   started once more from its request, moving itself into a fresh cgroup (the same id: the daemon
   hears 'K' and 'P' again); nothing is cloned any more. 0: it is not such a child. */
static int reborn(run_t *r) {
  int unread = 0;
  if (ioctl(r->go, FIONREAD, &unread) < 0 || unread == 0 || !r->req) return 0;
  siginfo_t si;
  memset(&si, 0, sizeof si);
  /* Its pipe is at EOF and it never got to exec: it is exiting, if not a zombie yet. */
  while (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  if (si.si_pid != r->pid || si.si_code != CLD_KILLED || si.si_status != SIGKILL) return 0;
  while (waitpid(r->pid, NULL, 0) < 0 && errno == EINTR) {
  }
  clone_into = 0;
  fprintf(stderr, "cronvisor-spawner: run %s was killed before its exec in its cgroup; its runs "
                  "now move into their cgroups after the fork\n", r->id);
  if (r->job_cg) r->job_cg->clean = 0;
  release_cg(r);
  r->failed = 1; /* dropped without a word: the run goes on as the new child */
  r->exited = 1;
  r->drain_until = 0;
  close_fd(&r->out);
  close_fd(&r->err);
  close_fd(&r->script);
  close_fd(&r->go);
  char *req = r->req;
  size_t len = r->req_len;
  r->req = NULL;
  start(req, req + len, 1);
  free(req);
  return 1;
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
  if (got == 0 && r->go >= 0 && reborn(r)) return;
  close_fd(&r->go);
  free(r->req);
  r->req = NULL;
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
    release_cg(r);
    pid_spare_put(r->pid_file); /* it never became a run: nothing to find by it */
    free(r->pid_file);
    r->pid_file = NULL;
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

/* The run's own cgroup, BASE/run-ID (a restarted daemon finds its processes by the name), with
   the job's limits set before anything of it runs; -1 and *en when it cannot be had. *clean: made
   now, so never killed (a child may be cloned into it). */
static int run_cgroup(const char *id, const char *mem_s, const char *cpu_s, const char *tasks_s,
                      int *clean, int *en) {
  char name[64];
  snprintf(name, sizeof name, "run-%s", id);
  int fresh = mkdirat(cg_base, name, 0755) == 0;
  int made = fresh || errno == EEXIST;
  if (!made && errno == ENOENT) {
    /* The base was removed (a daemon's clean stop removes its empty base while a `cronvisor
       run` beside it still starts): made again, by its path. */
    int again = -1;
    if ((mkdir(cg_base_path, 0755) == 0 || errno == EEXIST) &&
        (again = open(cg_base_path, O_DIRECTORY | O_RDONLY | O_CLOEXEC)) >= 0) {
      dup3(again, cg_base, O_CLOEXEC);
      close(again);
    }
    fresh = mkdirat(cg_base, name, 0755) == 0;
    made = fresh || errno == EEXIST;
  }
  *clean = fresh;
  int cg = -1;
  if (!made || (cg = openat(cg_base, name, O_DIRECTORY | O_RDONLY | O_CLOEXEC)) < 0) {
    *en = errno ? errno : EIO;
    return -1;
  }
  /* A limit that cannot be set fails the start (the daemon asks only for those its controllers
     can enforce, and warns of the others). */
  char v[48];
  long long cpu = atoll(cpu_s);
  if (*en == 0 && atoll(mem_s) > 0 && write_at(cg, "memory.max", mem_s) < 0) *en = errno;
  if (*en == 0 && cpu > 0) {
    snprintf(v, sizeof v, "%lld 100000", cpu * 1000);
    if (write_at(cg, "cpu.max", v) < 0) *en = errno;
  }
  if (*en == 0 && atoll(tasks_s) > 0 && write_at(cg, "pids.max", tasks_s) < 0) *en = errno;
  return cg;
}

/* The child, between fork and exec: what Node's spawn(..., { detached: true, cwd, env }) did.
   Never returns: the job's program, or errno on `ep` and exit 127. */
static void exec_child(int nice_v, long nofile, int cg, const char *cwd, char **argv,
                       char **envp, int out, int err, int ep, int sp, int go[2]) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; s++) sigaction(s, &dfl, NULL); /* ignored ones would be inherited */
  sigprocmask(SIG_SETMASK, &child_mask, NULL);
  setsid(); /* its own session and process group: signalled as one */
  /* Into the run's cgroup before anything of the job runs: all it forks, escaped or not, stays
     there. A run that cannot be contained is not started. */
  if (cg >= 0 && write_at(cg, "cgroup.procs", "0") < 0) {
    int why = errno;
    if (write(ep, &why, sizeof why) < 0) { /* the parent then takes exec as done */ }
    _exit(127);
  }
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
  /* Not the daemon's raised limit (Node lifts its soft open-files limit to the hard one): the
     usual 1024, or the job's `limits: { nofile }`. Set only now that the child holds its own few
     descriptors: before, a spawner holding over 1024 (runs under way, kept cgroups) left no room
     under the limit for the dups above, and the run failed to start with EMFILE. */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rlim_t want = nofile > 0 ? (rlim_t)nofile : 1024;
    if (nofile > 0 && want > rl.rlim_max && geteuid() == 0) rl.rlim_max = want;
    rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (chdir(cwd) < 0) goto fail;
  environ = envp; /* execvp searches the job's PATH, as Node's spawn does */
  execvp(argv[0], argv);
fail:;
  int why = errno;
  if (write(errfd, &why, sizeof why) < 0) { /* the parent then takes exec as done */ }
  _exit(127);
}

static void start(const char *p, const char *end, int retry) {
  const char *req = p;
  const char *id = field(&p, end), *nice_s = field(&p, end), *cwd = field(&p, end),
             *exitfile = field(&p, end), *pidfile = field(&p, end), *left_s = field(&p, end),
             *nofile_s = field(&p, end), *mem_s = field(&p, end), *cpu_s = field(&p, end),
             *tasks_s = field(&p, end), *cgname = field(&p, end), *argc_s = field(&p, end);
  if (!argc_s) die("malformed request");
  char left = left_s[0] == 'w' || left_s[0] == 'p' ? left_s[0] : 'k';
  long nofile = atol(nofile_s);
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
  int en = 0, cg = -1, clean = 0;
  char st[32] = "";
  pooled_t *job_cg = NULL;
  int limited = atoll(mem_s) > 0 || atoll(cpu_s) > 0 || atoll(tasks_s) > 0;
  if (cg_base >= 0 && !pool_off && cgname[0] && !limited) job_cg = pool_take(cgname);
  if (job_cg) {
    cg = job_cg->fd;
    clean = job_cg->clean;
  } else if (cg_base >= 0) {
    cg = run_cgroup(id, mem_s, cpu_s, tasks_s, &clean, &en);
  }
  if (en == 0 && (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
                  pipe2(ep, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0 ||
                  (script_len > 0 && pipe2(sp, O_CLOEXEC) < 0)))
    en = errno ? errno : EMFILE;
  int cloned = 0;
  for (int retried = retry; en == 0; retried = 1) {
    /* Born in the run's cgroup where it can be (clone3's CLONE_INTO_CGROUP, Linux 5.7): moving
       a process in (cgroup.procs) takes the kernel's cgroup lock for writing, which waits for a
       grace period and holds back every fork meanwhile: the tail of a tick's lateness. Only into
       a cgroup never killed (`clean`); else the child moves itself (exec_child). */
    cloned = cg >= 0 && clean && clone_into && !retry;
    pid = cloned ? fork_into(cg) : fork();
    if (pid < 0 && cloned) {
      /* ENOSYS, E2BIG, EINVAL: this kernel has no CLONE_INTO_CGROUP. Anything else: a cgroup it
         would not clone into; the child moving itself says why, if it cannot either. */
      if (errno == ENOSYS || errno == E2BIG || errno == EINVAL) clone_into = 0;
      cloned = 0;
      pid = fork();
    }
    if (pid < 0) {
      en = errno ? errno : EAGAIN;
      break;
    }
    if (pid == 0)
      exec_child(nice_v, nofile, cloned ? -1 : cg, cwd, argv, envp, out[1], err[1], ep[1], sp[0],
                 go);
    /* Its start time; and whether it is dying already, before it could run anything of its own:
       the kernel SIGKILLs a child cloned into a cgroup that cgroup.kill was written to (queued
       before clone3 returns: no waiting for the child to run). Never a run: it is reaped, the
       cgroup dropped, and the run forked once more into a fresh one, moving itself there; nothing
       is cloned any more (a kill this spawner was not told of, or a kernel that kills for another
       reason). */
    start_time(pid, st, sizeof st); /* not reaped yet (only reap() does), so still this process */
    if (!cloned || retried || !sigkill_pending(pid)) break;
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
    clone_into = 0;
    fprintf(stderr, "cronvisor-spawner: run %s was killed at its birth in its cgroup; its runs now "
                    "move into their cgroups after the fork\n", id);
    if (job_cg) {
      job_cg->clean = 0;
      job_cg->busy = 0;
      pool_drop(job_cg);
      job_cg = pool_take(cgname);
    } else {
      close_fd(&cg);
      char name[64];
      snprintf(name, sizeof name, "run-%s", id);
      unlinkat(cg_base, name, AT_REMOVEDIR);
    }
    cg = job_cg ? job_cg->fd : run_cgroup(id, mem_s, cpu_s, tasks_s, &clean, &en);
  }
  free(argv);
  free(envp);
  if (!cloned || en != 0) close_fd(&go[0]); /* else kept: did the child read its go byte? */
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
    if (job_cg) {
      if (job_cg->clean) pool_give_back(job_cg);
      else pool_drop(job_cg);
    } else if (cg >= 0) {
      char name[64];
      snprintf(name, sizeof name, "run-%s", id);
      close_fd(&cg);
      unlinkat(cg_base, name, AT_REMOVEDIR);
    }
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
  char pid_s[16];
  snprintf(pid_s, sizeof pid_s, "%d", (int)pid);
  if (retry && pidfile[0]) unlink(pidfile); /* the first child's */
  write_pid_file(pidfile, pid_s, st);
  const char *f[] = {id, pid_s, st};
  send_frame('K', f, 3, NULL, 0);
  /* Now the child may exec (exec_child waits for this byte; SIGPIPE is ignored here). */
  if (write(go[1], "", 1) < 0) { /* it died already: its exit is reaped as any run's */ }
  close_fd(&go[1]);
  add_run(id, exitfile, pidfile, left, cg, pid, st, out[0], err[0], ep[0], sp[1], p, script_len);
  run_t *r = runs[nruns - 1];
  r->job_cg = job_cg;
  if (cloned) {
    r->go = go[0];
    r->req_len = (size_t)(end - req);
    if (!(r->req = malloc(r->req_len))) die("malloc");
    memcpy(r->req, req, r->req_len);
  }
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
    if (frame[0] == 'S') {
      start(frame + 1, frame + len, 0);
    } else if (frame[0] == 'R') {
      const char *q = frame + 1, *path = field(&q, frame + len);
      if (!path) die("malformed request");
      recycle(path);
    } else if (frame[0] == 'D') {
      const char *q = frame + 1, *name = field(&q, frame + len);
      if (!name) die("malformed request");
      if (cg_base >= 0) pool_killed(name);
    } else {
      die("unknown request");
    }
    off += 4 + len;
  }
  memmove(inbuf, inbuf + off, inlen - off);
  inlen -= off;
}

int main(int argc, char **argv) {
  if (argc > 1) drain_ms = atoll(argv[1]);
  /* Escaped descendants of the runs come back here to be reaped, not to init. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
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
  if (argc > 2 && argv[2][0]) {
    cg_base_path = argv[2];
    /* Made again if it went (a daemon's clean stop removes its base when it is empty). */
    if (mkdir(cg_base_path, 0755) < 0 && errno != EEXIST) die(cg_base_path);
    cg_base = open(cg_base_path, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (cg_base < 0) die(cg_base_path);
    /* With the memory controller a kept cgroup's memory.peak would be the highest of all its
       runs (it cannot be reset before Linux 6.12): each run then gets a cgroup of its own. */
    char sc[512];
    pool_off = read_at(cg_base, "cgroup.subtree_control", sc, sizeof sc) >= 0 && strstr(sc, "memory");
  }
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
      if ((r->settled || r->failed) && ((r->out < 0 && r->err < 0) || now >= r->drain_until)) {
        const char *f[] = {r->id};
        if (!r->failed) send_frame('C', f, 1, NULL, 0);
        drop_run(i);
        continue;
      }
      if (r->exited && !r->settled && !r->failed) {
        /* Its leftovers are being waited for or killed: looked at again shortly. */
        if (wait < 0 || wait > SETTLE_POLL_MS) wait = SETTLE_POLL_MS;
      } else if (r->exited) {
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
    if (pool_sweep_at > 0 && !daemon_gone && (wait < 0 || pool_sweep_at - now < wait))
      wait = pool_sweep_at - now > 0 ? pool_sweep_at - now : 0;
    /* Here, after the runs that ended were dropped: before, a last run's end went unnoticed. */
    if (daemon_gone && nruns == 0) {
      pid_spares_clear();
      return 0;
    }
    /* Nothing ready: an exit file made ahead (fresh_make), then look again. */
    int ahead =
        fresh_dir && !daemon_gone && nfresh + nrecycled < fresh_target && exits_written >= 2;
    int got = poll(pfds, n, ahead ? 0 : (int)wait);
    if (got < 0 && errno != EINTR) die("poll");
    if (got == 0 && ahead) fresh_make();
    for (size_t i = 0; i < nruns; i++) try_settle(runs[i]);
    pool_sweep(now_ms());
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
