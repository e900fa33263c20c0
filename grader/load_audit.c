/* An LD_AUDIT library (glibc's rtld-audit interface, man 7 rtld-audit) that reports every object
 * the dynamic loader maps into the program: the libraries it needs, those loaded later with dlopen
 * (by the program or by a library such as the CUDA runtime), in any link-map namespace.
 * grader/loaded_libraries.py builds it, runs the student's program with
 * LD_AUDIT=<this .so> and LADDER_LOAD_AUDIT_FD=<fd>, and checks the lines.
 *
 * One write(2) per object, at once, to the descriptor the grader opened (the write end of a pipe),
 * so the program cannot take a line back: it can only add lines, which the checker refuses as well.
 * Each record is "\n<path>\n" in one write, so that a partial line the program wrote first cannot
 * become a prefix of the path. The main program is "[main] <its path>". Control characters and
 * backslashes in a path are written as \xNN, so a path cannot forge a second line.
 *
 * It fails closed: without a valid descriptor, or if the descriptor no longer is the one it was
 * given (closed, or another file put in its place with dup2) or a write fails, it ends the process
 * with status LADDER_AUDIT_EXIT, before the object is used. */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define LADDER_AUDIT_EXIT 97
#define MAX_RECORD 4000 /* below PIPE_BUF (4096): one write is atomic, not interleaved with others */

static int audit_fd = -1;
static dev_t audit_dev;
static ino_t audit_ino;

static void die(const char *why) {
    static const char head[] = "ladder load audit: ";
    (void)!write(2, head, sizeof head - 1);
    const char *end = why;
    while (*end) end++;
    (void)!write(2, why, (size_t)(end - why));
    (void)!write(2, "\n", 1);
    _exit(LADDER_AUDIT_EXIT);
}

static void open_channel(void) {
    const char *text = getenv("LADDER_LOAD_AUDIT_FD");
    char *end;
    long fd = text ? strtol(text, &end, 10) : -1;
    struct stat st;
    if (!text || !*text || *end || fd < 0 || fd > 65535 || fstat((int)fd, &st) != 0)
        die("LADDER_LOAD_AUDIT_FD does not name an open descriptor");
    audit_fd = (int)fd;
    audit_dev = st.st_dev;
    audit_ino = st.st_ino;
}

static void record(const char *prefix, const char *path) {
    static const char hex[] = "0123456789abcdef";
    char buf[MAX_RECORD + 8];
    size_t n = 0;
    struct stat st;
    if (audit_fd < 0) open_channel();
    if (fstat(audit_fd, &st) != 0 || st.st_dev != audit_dev || st.st_ino != audit_ino)
        die("the report descriptor was closed or replaced");
    buf[n++] = '\n';
    for (const char *p = prefix; *p; p++) buf[n++] = *p;
    for (const unsigned char *p = (const unsigned char *)path; *p && n < MAX_RECORD; p++) {
        if (*p < 0x20 || *p == 0x7f || *p == '\\') {
            buf[n++] = '\\', buf[n++] = 'x', buf[n++] = hex[*p >> 4], buf[n++] = hex[*p & 15];
        } else {
            buf[n++] = (char)*p;
        }
    }
    if (n >= MAX_RECORD) { /* a cut path no longer names its file: marked, so the checker refuses it */
        static const char cut[] = "[cut]";
        for (const char *p = cut; *p; p++) buf[n++] = *p;
    }
    buf[n++] = '\n';
    if (write(audit_fd, buf, n) != (ssize_t)n) die("a report line could not be written");
}

unsigned int la_version(unsigned int version) {
    open_channel();
    return version < LAV_CURRENT ? version : LAV_CURRENT;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie) {
    (void)lmid, (void)cookie;
    if (map->l_name && map->l_name[0]) {
        record("", map->l_name);
    } else { /* the main program has no name in its link map */
        char exe[MAX_RECORD];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[len > 0 ? len : 0] = '\0';
        record("[main] ", exe);
    }
    return 0; /* no symbol-binding callbacks: nothing to slow the program down */
}
