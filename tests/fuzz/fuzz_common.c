/* The in-memory files the libFuzzer harnesses hand to the path-taking readers (memfd_create,
 * reused across inputs; a file under $TMPDIR when memfd is unavailable). */
#define _GNU_SOURCE
#include "fuzz_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int fds[FUZZ_SLOTS] = {-1, -1};
static char paths[FUZZ_SLOTS][64];
static char named[FUZZ_SLOTS]; /* the fallback's files, removed at exit */

static void remove_files(void)
{
    for (int i = 0; i < FUZZ_SLOTS; i++)
        if (named[i]) unlink(paths[i]);
}

static void open_slot(int slot)
{
    int fd = memfd_create("cltrain-fuzz", MFD_CLOEXEC);
    if (fd >= 0) {
        snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", fd);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(paths[slot], sizeof paths[slot], "%s/cltrain-fuzz-XXXXXX",
                 tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
        fd = mkstemp(paths[slot]);
        if (fd < 0) {
            fprintf(stderr, "fuzz: cannot create a temporary file: %s\n", strerror(errno));
            abort();
        }
        if (!named[0] && !named[1]) atexit(remove_files);
        named[slot] = 1;
    }
    fds[slot] = fd;
}

const char *fuzz_file(int slot, const uint8_t *data, size_t n)
{
    if (slot < 0 || slot >= FUZZ_SLOTS) abort();
    if (fds[slot] < 0) open_slot(slot);
    size_t done = 0;
    if (ftruncate(fds[slot], 0) != 0) abort();
    while (done < n) {
        ssize_t w = pwrite(fds[slot], data + done, n - done, (off_t)done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) abort();
        done += (size_t)w;
    }
    return paths[slot];
}
