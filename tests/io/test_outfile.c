/* Tests of the safe output files (cltrain/outfile.h): a replacement appears only at the commit,
 * with the replaced file's permissions, and a discard or a failed commit (a file size limit)
 * leaves the target and no temporary behind; symlinks are followed and kept; directories, FIFOs
 * and missing folders are refused with messages naming the path; stale temporaries of dead
 * processes are removed, this process's are not; appends accumulate; clt_outfile_same knows one
 * file through symlinks and hard links, and one name to create in one folder; a lock held
 * refuses another process, naming this one, and is removed on release. Pure C, no OpenCL; each
 * test works in its own mkdtemp folder. */
#include "common.h"
#include "cltrain/errors.h"
#include "cltrain/outfile.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[512];

static void setup(void)
{
    tc_mkdtemp(g_dir, sizeof g_dir);
}

static void teardown(void)
{
    tc_rmdir(g_dir);
}

/* "<g_dir>/<name>" in a static buffer (one at a time) */
static const char *in_dir(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    return path;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The file's whole contents, at most 255 bytes ("" if it cannot be read). */
static const char *get(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
}

START_TEST(test_replace)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", in_dir("out.csv"));
    put(path, "old\n");
    ck_assert_int_eq(chmod(path, 0640), 0);
    TC_OK(NULL, clt_outfile_check(path));
    ck_assert_int_eq(tc_count_files(g_dir, NULL, 0), 1); /* the probe is gone */

    clt_outfile *f = NULL;
    TC_OK(NULL, clt_outfile_open(&f, path));
    ck_assert_ptr_nonnull(f);
    TC_OK(NULL, clt_outfile_printf(f, "%s,%d\n", "step", 7));
    TC_OK(NULL, clt_outfile_write(f, "abc", 3));
    TC_OK(NULL, clt_outfile_write(f, NULL, 0));
    fputs("\n", clt_outfile_stream(f));
    ck_assert_str_eq(get(path), "old\n"); /* untouched until the commit */
    ck_assert_int_eq(tc_count_files(g_dir, NULL, 0), 2);
    TC_OK(NULL, clt_outfile_commit(f));
    ck_assert_str_eq(get(path), "step,7\nabc\n");
    ck_assert_int_eq(tc_count_files(g_dir, NULL, 0), 1);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_int_eq(sb.st_mode & 0777, 0640);

    /* a new file */
    TC_OK(NULL, clt_outfile_open(&f, in_dir("new.txt")));
    TC_OK(NULL, clt_outfile_printf(f, "x"));
    TC_OK(NULL, clt_outfile_commit(f));
    ck_assert_str_eq(get(in_dir("new.txt")), "x");
}
END_TEST

START_TEST(test_discard)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", in_dir("keep.txt"));
    put(path, "kept");
    clt_outfile *f = NULL;
    TC_OK(NULL, clt_outfile_open(&f, path));
    TC_OK(NULL, clt_outfile_printf(f, "lost"));
    clt_outfile_discard(f);
    clt_outfile_discard(NULL);
    ck_assert_str_eq(get(path), "kept");
    ck_assert_int_eq(tc_count_files(g_dir, NULL, 0), 1);
    ck_assert_int_eq(clt_outfile_commit(NULL), CLT_ERR_INVALID_ARG);
}
END_TEST

/* A write past RLIMIT_FSIZE fails at the commit (the stream is buffered): CLT_ERR_IO naming the
 * path, the target as it was, no temporary left. */
START_TEST(test_failed_commit)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", in_dir("big.bin"));
    put(path, "before");
    clt_outfile *f = NULL;
    TC_OK(NULL, clt_outfile_open(&f, path));
    signal(SIGXFSZ, SIG_IGN); /* this test's own process (check forks each test) */
    struct rlimit lim = {100, 100};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static char block[4096];
    memset(block, 'z', sizeof block);
    clt_status st = clt_outfile_write(f, block, sizeof block);
    if (st == CLT_OK) st = clt_outfile_commit(f);
    else clt_outfile_discard(f);
    ck_assert_int_eq(st, CLT_ERR_IO);
    ck_assert_msg(tc_contains(clt_last_errmsg(), path), "names the path: %s", clt_last_errmsg());
    ck_assert_str_eq(get(path), "before");
    ck_assert_int_eq(tc_count_files(g_dir, NULL, 0), 1);
}
END_TEST

START_TEST(test_symlink)
{
    char target[1024], link[1024];
    snprintf(target, sizeof target, "%s", in_dir("target.txt"));
    snprintf(link, sizeof link, "%s", in_dir("link.txt"));
    put(target, "old");
    ck_assert_int_eq(symlink("target.txt", link), 0); /* relative: from the link's folder */
    clt_outfile *f = NULL;
    TC_OK(NULL, clt_outfile_open(&f, link));
    TC_OK(NULL, clt_outfile_printf(f, "new"));
    TC_OK(NULL, clt_outfile_commit(f));
    struct stat sb;
    ck_assert_int_eq(lstat(link, &sb), 0);
    ck_assert(S_ISLNK(sb.st_mode));
    ck_assert_str_eq(get(target), "new");
    unlink(link); /* tc_rmdir removes regular files */
}
END_TEST

static bool same(const char *a, const char *b)
{
    char x[1024];
    bool r = true;
    snprintf(x, sizeof x, "%s", in_dir(a)); /* in_dir's buffer is reused */
    TC_OK(NULL, clt_outfile_same(x, in_dir(b), &r));
    return r;
}

START_TEST(test_same)
{
    put(in_dir("a.csv"), "a");
    put(in_dir("b.csv"), "a");
    ck_assert_int_eq(mkdir(in_dir("sub"), 0755), 0);
    ck_assert_int_eq(symlink("a.csv", in_dir("sym.csv")), 0);
    ck_assert_int_eq(symlink("sub", in_dir("subl")), 0);
    ck_assert_int_eq(symlink("sub/new.st", in_dir("dangling.st")), 0);
    char hard[1024];
    snprintf(hard, sizeof hard, "%s", in_dir("hard.csv"));
    ck_assert_int_eq(link(in_dir("a.csv"), hard), 0);
    ck_assert(same("a.csv", "a.csv"));
    ck_assert(same("a.csv", "./a.csv"));
    ck_assert(same("sym.csv", "a.csv"));
    ck_assert(same("hard.csv", "a.csv"));
    ck_assert(!same("a.csv", "b.csv")); /* equal contents, two files */
    ck_assert(same("sub/new.st", "subl/new.st")); /* neither exists: one name, one folder */
    ck_assert(same("dangling.st", "sub/new.st"));
    ck_assert(!same("sub/new.st", "new.st"));
    ck_assert(!same("sub/new.st", "sub/other.st"));
    ck_assert(!same("missing/x", "missing/x")); /* no such folder: names no file */
    bool r = true;
    ck_assert_int_eq(clt_outfile_same("", in_dir("a.csv"), &r), CLT_ERR_INVALID_ARG);
    ck_assert(!r);
    unlink(in_dir("sym.csv"));
    unlink(in_dir("subl"));
    unlink(in_dir("dangling.st"));
}
END_TEST

/* Whether a forked process gets the lock on path (exit 0), or fails naming this process (1). */
static int child_locks(const char *path)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char me[64];
        snprintf(me, sizeof me, "process %ld ", (long)getppid());
        clt_outfile_lock *l = NULL;
        clt_status st = clt_outfile_lock_acquire(&l, path);
        clt_outfile_lock_release(l);
        _exit(st == CLT_OK ? 0 : st == CLT_ERR_IO && tc_contains(clt_last_errmsg(), me) ? 1 : 2);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

START_TEST(test_lock)
{
    char path[1024], lock[1040];
    snprintf(path, sizeof path, "%s", in_dir("m.st"));
    snprintf(lock, sizeof lock, "%s.lock", path);
    clt_outfile_lock *l = NULL;
    TC_OK(NULL, clt_outfile_lock_acquire(&l, path));
    ck_assert_int_eq(child_locks(path), 1); /* held: refused, naming this process */
    clt_outfile *f = NULL; /* the output is written and replaced under the lock */
    TC_OK(NULL, clt_outfile_open(&f, path));
    TC_OK(NULL, clt_outfile_commit(f));
    ck_assert_int_eq(child_locks(path), 1);
    clt_outfile_lock_release(l);
    ck_assert_int_ne(access(lock, F_OK), 0); /* removed */
    ck_assert_int_eq(child_locks(path), 0);
    put(lock, "999999\n"); /* left by a dead process: taken over */
    TC_OK(NULL, clt_outfile_lock_acquire(&l, path));
    clt_outfile_lock_release(l);
    clt_outfile_lock_release(NULL);
}
END_TEST

/* Each refusal through every entry point: CLT_ERR_IO with a message naming the path and why,
 * *out NULL. */
static void check_refused(const char *path, const char *why)
{
    clt_status st = clt_outfile_check(path);
    ck_assert_msg(st == CLT_ERR_IO, "check %s: %s", path, clt_status_name(st));
    ck_assert_msg(tc_contains(clt_last_errmsg(), path) && tc_contains(clt_last_errmsg(), why),
                  "%s", clt_last_errmsg());
    clt_outfile *f = (clt_outfile *)&st;
    ck_assert_int_eq(clt_outfile_open(&f, path), CLT_ERR_IO);
    ck_assert_ptr_null(f);
    ck_assert(tc_contains(clt_last_errmsg(), why));
    FILE *a = stdout;
    ck_assert_int_eq(clt_outfile_append(&a, path), CLT_ERR_IO);
    ck_assert_ptr_null(a);
    ck_assert(tc_contains(clt_last_errmsg(), why));
}

START_TEST(test_refusals)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", in_dir("sub"));
    ck_assert_int_eq(mkdir(path, 0700), 0);
    check_refused(path, "a directory");
    rmdir(path);
    snprintf(path, sizeof path, "%s", in_dir("fifo"));
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    check_refused(path, "FIFO");
    unlink(path);
    snprintf(path, sizeof path, "%s", in_dir("nowhere/out.txt"));
    check_refused(path, "does not exist");
    ck_assert_int_eq(clt_outfile_check(""), CLT_ERR_INVALID_ARG);
    clt_outfile *f = NULL;
    ck_assert_int_eq(clt_outfile_open(&f, ""), CLT_ERR_INVALID_ARG);
    ck_assert_int_eq(tc_count_files(g_dir, NULL, 0), 0);
}
END_TEST

/* "<path>.tmp.<pid>.<k>" of a process that has exited goes; this process's stays. */
START_TEST(test_stale_temporaries)
{
    pid_t child = fork();
    if (child == 0) _exit(0);
    ck_assert_int_gt(child, 0);
    ck_assert_int_eq(waitpid(child, NULL, 0), child); /* reaped: kill(child, 0) is ESRCH */
    char stale[1100], mine[1100], path[1024];
    snprintf(path, sizeof path, "%s", in_dir("out.txt"));
    snprintf(stale, sizeof stale, "%s.tmp.%ld.0", path, (long)child);
    snprintf(mine, sizeof mine, "%s.tmp.%ld.99", path, (long)getpid());
    put(stale, "stale");
    put(mine, "mine");
    TC_OK(NULL, clt_outfile_check(path));
    ck_assert_int_eq(access(stale, F_OK), -1);
    ck_assert_int_eq(access(mine, F_OK), 0);
}
END_TEST

START_TEST(test_append)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", in_dir("log.txt"));
    for (int i = 0; i < 2; i++) {
        FILE *a = NULL;
        TC_OK(NULL, clt_outfile_append(&a, path));
        fprintf(a, "line %d\n", i);
        ck_assert_int_eq(fclose(a), 0);
    }
    ck_assert_str_eq(get(path), "line 0\nline 1\n");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("outfile");
    TCase *tc = tc_tcase("outfile");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_replace);
    tcase_add_test(tc, test_discard);
    tcase_add_test(tc, test_failed_commit);
    tcase_add_test(tc, test_symlink);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_stale_temporaries);
    tcase_add_test(tc, test_append);
    tcase_add_test(tc, test_same);
    tcase_add_test(tc, test_lock);
    suite_add_tcase(s, tc);
    return tc_run(s);
}
