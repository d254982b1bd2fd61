/* The job the lateness benchmarks run: append "JOB SLOT SECONDS.NANOS" (the wall time this
 * process started running) to argv[1], one write(2) with O_APPEND so concurrent runs never
 * interleave. JOB and SLOT come from CRONVISOR_JOB / CRONVISOR_SLOT (the bare daemon sets them
 * too). Nothing else: its own cost is a few microseconds after exec. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (argc < 2) return 2;
  const char *job = getenv("CRONVISOR_JOB");
  const char *slot = getenv("CRONVISOR_SLOT");
  char buf[256];
  int n = snprintf(buf, sizeof buf, "%s %s %lld.%09ld\n", job ? job : "-", slot ? slot : "-",
                   (long long)ts.tv_sec, ts.tv_nsec);
  int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return 1;
  if (write(fd, buf, (size_t)n) != n) return 1;
  return close(fd) == 0 ? 0 : 1;
}
