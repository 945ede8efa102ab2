// A misbehaving program for the command suite (no interpreter needed):
//   exec_helper args ...      prints each argument on its own line
//   exec_helper forkbomb TAG  forks without end
//   exec_helper spin TAG      burns CPU forever
//   exec_helper alloc TAG     allocates and touches 8 GiB
//   exec_helper flood TAG     writes to stdout forever
//   exec_helper orphan TAG    starts a child that sleeps an hour, then exits
//   exec_helper setsid TAG    starts a child that leaves the process group
//                             (setsid) and sleeps an hour, then exits
//   exec_helper stdin         copies stdin to stdout
// TAG only marks the processes so the test can look for survivors in /proc.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string mode = argv[1];
  if (mode == "args") {
    for (int i = 2; i < argc; ++i) std::printf("%s\n", argv[i]);
    return 0;
  }
  if (mode == "forkbomb") {
    for (;;) {
      fork();
    }
  }
  if (mode == "spin") {
    volatile unsigned long x = 0;
    for (;;) ++x;
  }
  if (mode == "alloc") {
    const size_t n = size_t{8} << 30;
    char* p = static_cast<char*>(std::malloc(n));
    if (p == nullptr) {
      std::fprintf(stderr, "allocation refused\n");
      return 3;
    }
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    return 0;
  }
  if (mode == "flood") {
    static char buf[65536];
    std::memset(buf, 'y', sizeof buf);
    for (;;) {
      if (write(1, buf, sizeof buf) < 0) return 1;
    }
  }
  if (mode == "orphan") {
    if (fork() == 0) {
      sleep(3600);
      return 0;
    }
    std::printf("parent leaves\n");
    return 0;
  }
  if (mode == "setsid") {
    int sync[2];
    if (pipe(sync) != 0) return 1;
    if (fork() == 0) {
      setsid();
      (void)!write(sync[1], "s", 1);  // in its own session now
      sleep(3600);
      return 0;
    }
    char c;
    if (read(sync[0], &c, 1) != 1) return 1;
    std::printf("left a new session behind\n");
    return 0;
  }
  if (mode == "stdin") {
    char buf[4096];
    ssize_t n;
    while ((n = read(0, buf, sizeof buf)) > 0) (void)!write(1, buf, n);
    return 0;
  }
  return 2;
}
