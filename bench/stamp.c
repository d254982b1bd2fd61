/* The job the lateness benchmarks run: append "JOB SLOT SECONDS.NANOS WAIT_NS" to argv[1], one
 * write(2) with O_APPEND so concurrent runs never interleave. SECONDS.NANOS is the wall time this
 * process started running; WAIT_NS is how long it had been runnable without a CPU since its fork
 * (the second field of /proc/self/schedstat, read after the clock so it costs the stamp nothing):
 * the part of its lateness that is the machine's run queue rather than whoever forked it. JOB and
 * SLOT come from CRONVISOR_JOB / CRONVISOR_SLOT (the bare daemon sets them too). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long run_queue_wait_ns(void) {
  unsigned long long run = 0, wait = 0;
  FILE *f = fopen("/proc/self/schedstat", "r");
  if (!f) return -1;
  int n = fscanf(f, "%llu %llu", &run, &wait);
  fclose(f);
  return n == 2 ? (long long)wait : -1;
}

int main(int argc, char **argv) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (argc < 2) return 2;
  long long wait = run_queue_wait_ns();
  const char *job = getenv("CRONVISOR_JOB");
  const char *slot = getenv("CRONVISOR_SLOT");
  char buf[256];
  int n = snprintf(buf, sizeof buf, "%s %s %lld.%09ld %lld\n", job ? job : "-", slot ? slot : "-",
                   (long long)ts.tv_sec, ts.tv_nsec, wait);
  int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return 1;
  if (write(fd, buf, (size_t)n) != n) return 1;
  return close(fd) == 0 ? 0 : 1;
}
