/* What a submission could reach from inside the grader's isolation, asked with raw system calls
 * (no libc call for an integrity check to see). Prints one line per finding, "FOUND <what>",
 * then "probed <n> processes". grader/tests/test_sandbox.py runs it through runs.Jail, as the grader
 * runs a student's program; grader/fixtures/03/raw_syscall_probe.fixture does the same inside a
 * rung. Looks for: the secret's variable in any readable /proc/<pid>/environ (pid 1 included),
 * the file named by --secret-file in any readable /proc/<pid>/cmdline, the hidden problem list
 * and the reference build under the folders named by --work or by scripts/assignment.py's path,
 * and a host path in /proc/1/cmdline. x86-64 Linux. */
#include <stddef.h>

static long sys3(long nr, long a, long b, long c) {
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}
enum { SYS_read = 0, SYS_write = 1, SYS_open = 2, SYS_close = 3, SYS_readlink = 89 };

static size_t len(const char* s) { size_t n = 0; while (s[n]) ++n; return n; }
static void say(const char* a, const char* b) {
  sys3(SYS_write, 1, (long)a, (long)len(a));
  sys3(SYS_write, 1, (long)b, (long)len(b));
  sys3(SYS_write, 1, (long)"\n", 1);
}
static long slurp(const char* path, char* buf, long size) {
  long fd = sys3(SYS_open, (long)path, 0, 0), n = 0, got;
  if (fd < 0) return -1;
  while (n < size - 1 && (got = sys3(SYS_read, fd, (long)(buf + n), size - 1 - n)) > 0) n += got;
  sys3(SYS_close, fd, 0, 0);
  buf[n] = 0;
  return n;
}
static int starts(const char* s, const char* p) { while (*p) if (*s++ != *p++) return 0; return 1; }
static const char* find(const char* s, long n, const char* p) {
  for (long i = 0; i < n; ++i) if (starts(s + i, p)) return s + i;
  return 0;
}
static void join(char* out, const char* a, const char* b) {
  size_t i = 0;
  for (; *a && i < 500; ++a) out[i++] = *a;
  for (; *b && i < 1000; ++b) out[i++] = *b;
  out[i] = 0;
}
static void number(char* out, long v) {
  char tmp[24]; int n = 0;
  do tmp[n++] = (char)('0' + v % 10); while (v /= 10);
  while (n) *out++ = tmp[--n];
  *out = 0;
}
static char buf[1 << 16], path[1100], probe[1100];

static void readable(const char* what, const char* file) {
  if (slurp(file, probe, sizeof probe) >= 0) say(what, file);
}

int main(void) {
  long processes = 0;
  for (long pid = 1; pid < 1 << 16; ++pid) {
    char num[24];
    number(num, pid);
    join(path, "/proc/", num);
    join(probe, path, "/environ");
    long n = slurp(probe, buf, sizeof buf);
    if (n < 0 && slurp((join(probe, path, "/cmdline"), probe), buf, sizeof buf) < 0) continue;
    ++processes;
    if (n > 0 && find(buf, n, "LADDER_GRADER_SECRET=")) say("FOUND the secret in the environment of pid ", num);
    join(probe, path, "/cmdline");
    n = slurp(probe, buf, sizeof buf);
    if (pid == 1 && n > 0 && (find(buf, n, "grading-") || find(buf, n, "/tmp/ladder")))
      say("FOUND a host path in /proc/1/cmdline: ", buf);
    for (long i = 0; i < n; i += (long)len(buf + i) + 1) {
      const char* arg = buf + i;
      const char* next = i + (long)len(arg) + 1 < n ? arg + len(arg) + 1 : "";
      if (starts(arg, "--secret-file") && *next) readable("FOUND the secret file readable: ", next);
      if (starts(arg, "--work") && *next) {
        join(path, next, "/reference-build/CMakeCache.txt");
        readable("FOUND the reference build readable: ", path);
      }
      const char* script = find(arg, (long)len(arg), "scripts/assignment.py");
      if (script) {
        char root[1100];
        size_t k = (size_t)(script - arg);
        for (size_t j = 0; j < k && j < 1000; ++j) root[j] = arg[j];
        root[k < 1000 ? k : 1000] = 0;
        if (root[0] != '/') {  /* a relative script path: from the process's working folder */
          char cwd[1100], link[64];
          join(link, "/proc/", num);
          join(probe, link, "/cwd");
          long m = sys3(SYS_readlink, (long)probe, (long)cwd, 1000);
          if (m <= 0) continue;
          cwd[m] = 0;
          join(probe, cwd, "/");
          join(cwd, probe, root);
          join(root, cwd, "");
        }
        join(path, root, "grader/hidden/hidden.problems");
        readable("FOUND the hidden problems readable: ", path);
      }
    }
  }
  char count[24];
  number(count, processes);
  say("probed processes: ", count);
  return 0;
}
