/*
 * holdfsync: an LD_PRELOAD shim that makes a SIGKILL of a process look like a power cut to its
 * append-only files. Bytes written to a tracked file stay in this process's memory until the
 * process calls fsync() or fdatasync() on that file descriptor; only then are they written to the
 * file (and synced). So when the process is killed, exactly what a power cut would lose (written,
 * acknowledged, not yet synced) is gone, and what it had synced is on disk.
 *
 * Tracked: file descriptors opened (open, open64, openat, openat64, creat, creat64) with a path
 * that contains HOLDFSYNC_MATCH (default ".aof": Valkey's appendonlydir/ base, incr and manifest
 * files). Valkey appends to its incr file with write() and syncs it with fdatasync() (fsync on
 * some platforms), from the main thread or its bio thread, so both are covered under one lock.
 *
 * close() of a tracked descriptor drops its held bytes: on a real machine, data closed without a
 * sync sits in the page cache and a power cut loses it too (the worst case; Valkey syncs an incr
 * file before it closes it after a rewrite, and the manifest before it renames it). Files written
 * through stdio (the rewrite child's temp file: glibc's fopen does not come through open()) are
 * not held; Valkey syncs them before it renames them into place, so nothing a power cut could lose
 * is missed. A forked child inherits the held bytes and drops them when it exits, as it should.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FDS 65536

struct held {
  char *buf;
  size_t len, cap;
};

static struct held *table[MAX_FDS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real_creat)(const char *, mode_t);
static int (*real_creat64)(const char *, mode_t);

#define REAL(name) real_##name

/* A fork (Valkey's AOF rewrite and RDB save children) takes the lock across it, so the child
   never starts with the lock held by a thread it does not have (it would hang at its first sync). */
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork(void) { pthread_mutex_unlock(&lock); }

/* The real functions, found once when the shim is loaded (before the program's main). */
__attribute__((constructor)) static void resolve(void) {
  pthread_atfork(before_fork, after_fork, after_fork);
  real_write = dlsym(RTLD_NEXT, "write");
  real_fsync = dlsym(RTLD_NEXT, "fsync");
  real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
  real_close = dlsym(RTLD_NEXT, "close");
  real_open = dlsym(RTLD_NEXT, "open");
  real_open64 = dlsym(RTLD_NEXT, "open64");
  real_openat = dlsym(RTLD_NEXT, "openat");
  real_openat64 = dlsym(RTLD_NEXT, "openat64");
  real_creat = dlsym(RTLD_NEXT, "creat");
  real_creat64 = dlsym(RTLD_NEXT, "creat64");
}

static int matches(const char *path) {
  const char *m = getenv("HOLDFSYNC_MATCH");
  if (!m || !*m) m = ".aof";
  return path && strstr(path, m) != NULL;
}

/* Starts holding writes to fd (a new descriptor: anything held under that number is dropped). */
static int track(int fd, const char *path) {
  if (fd < 0 || fd >= MAX_FDS) return fd;
  pthread_mutex_lock(&lock);
  if (table[fd]) {
    free(table[fd]->buf);
    free(table[fd]);
    table[fd] = NULL;
  }
  if (matches(path)) table[fd] = calloc(1, sizeof(struct held));
  pthread_mutex_unlock(&lock);
  return fd;
}

/* Writes out what fd holds (called under the lock). -1 with errno on a failed write. */
static int flush_held(int fd) {
  struct held *h = table[fd];
  size_t off = 0;
  while (h && off < h->len) {
    ssize_t n = REAL(write)(fd, h->buf + off, h->len - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      memmove(h->buf, h->buf + off, h->len - off);
      h->len -= off;
      return -1;
    }
    off += (size_t)n;
  }
  if (h) h->len = 0;
  return 0;
}

ssize_t write(int fd, const void *data, size_t n) {
  if (fd >= 0 && fd < MAX_FDS && table[fd]) {
    pthread_mutex_lock(&lock);
    struct held *h = table[fd];
    if (h) {
      if (h->len + n > h->cap) {
        size_t cap = h->cap ? h->cap : 65536;
        while (cap < h->len + n) cap *= 2;
        char *grown = realloc(h->buf, cap);
        if (!grown) {
          pthread_mutex_unlock(&lock);
          errno = ENOSPC;
          return -1;
        }
        h->buf = grown;
        h->cap = cap;
      }
      memcpy(h->buf + h->len, data, n);
      h->len += n;
      pthread_mutex_unlock(&lock);
      return (ssize_t)n;
    }
    pthread_mutex_unlock(&lock);
  }
  return REAL(write)(fd, data, n);
}

static int synced(int fd, int (*sync)(int)) {
  if (fd >= 0 && fd < MAX_FDS) {
    pthread_mutex_lock(&lock);
    int failed = table[fd] ? flush_held(fd) : 0;
    if (failed) {
      pthread_mutex_unlock(&lock);
      return -1;
    }
    int rc = sync(fd);
    pthread_mutex_unlock(&lock);
    return rc;
  }
  return sync(fd);
}

int fsync(int fd) { return synced(fd, REAL(fsync)); }
int fdatasync(int fd) { return synced(fd, REAL(fdatasync)); }

int close(int fd) {
  if (fd >= 0 && fd < MAX_FDS && table[fd]) {
    pthread_mutex_lock(&lock);
    if (table[fd]) {
      free(table[fd]->buf);
      free(table[fd]);
      table[fd] = NULL;
    }
    pthread_mutex_unlock(&lock);
  }
  return REAL(close)(fd);
}

static mode_t mode_arg(int flags, va_list ap) {
  return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return track(REAL(open)(path, flags, mode), path);
}

int open64(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return track(REAL(open64)(path, flags, mode), path);
}

int openat(int dir, const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return track(REAL(openat)(dir, path, flags, mode), path);
}

int openat64(int dir, const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return track(REAL(openat64)(dir, path, flags, mode), path);
}

int creat(const char *path, mode_t mode) { return track(REAL(creat)(path, mode), path); }
int creat64(const char *path, mode_t mode) { return track(REAL(creat64)(path, mode), path); }
