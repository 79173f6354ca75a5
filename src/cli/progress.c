/* Progress of a training run: the stop signals (Ctrl-C, SIGTERM, SIGHUP) that end it at a step
 * boundary, the progress line on a terminal or plain log lines, epoch summaries, and the
 * metrics file's JSON lines, all fed by the trainer's events. */
#include "cli/run.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* Ctrl-C (SIGINT), SIGTERM (preemption on clusters) and SIGHUP (the terminal went away): the
 * first one raises the flag the training loop checks before every step (it stops at a step
 * boundary, saves a checkpoint if --save was given, and returns CLT_ERR_INTERRUPTED); the exit
 * code is then the shell's for a death by that signal, 128 + its number (130, 143, 129).
 * SA_RESETHAND makes a second one of the same kind kill the program as usual; not under
 * mpirun, whose ranks often get one signal twice (a launcher's to every process, then
 * mpirun's forwarded copy a second later) and must live to stop together: there mpirun's own
 * SIGKILL, a second after its SIGTERM, is the hard end. */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NSTOP_SIGNALS (int)(sizeof stop_signals / sizeof stop_signals[0])
static volatile sig_atomic_t interrupt_flag = 0; /* the signal's number once one came */
static struct sigaction old_actions[NSTOP_SIGNALS]; /* restored after the run */

static void on_stop_signal(int sig)
{
    interrupt_flag = sig;
}

const char *cli_stop_signal_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGINT";
}

void cli_catch_stop_signals(bool repeated)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = repeated ? 0 : SA_RESETHAND;
    interrupt_flag = 0;
    for (int i = 0; i < NSTOP_SIGNALS; i++)
        sigaction(stop_signals[i], &sa, &old_actions[i]);
}

void cli_restore_stop_signals(void)
{
    for (int i = 0; i < NSTOP_SIGNALS; i++)
        sigaction(stop_signals[i], &old_actions[i], NULL);
}


const volatile sig_atomic_t *cli_stop_flag(void)
{
    return &interrupt_flag;
}


static void fmt_duration(double s, char *dst, size_t n)
{
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t >= 3600) snprintf(dst, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(dst, n, "%ld:%02ld", t / 60, t % 60);
}

/* What a run's rate counts: a language model's samples are its tokens (B x T a step). */
static const char *unit_of(const struct reporter *r)
{
    return r->text ? "tokens" : "samples";
}

/* The training thread's host waits since `before`, by reason, then the streaming loader's
 * thread: "host waits 6 (log 5, eval 1); loader thread waits 465 (1.20 s), batch stall 1.25 s"
 * (the loader thread's waits for the device and the time the training thread waited for a
 * batch; both grow together when the device is the bottleneck, see loader.h). */
static void print_waits(const struct clt_train_event *e, const struct clt_ctx_stats *before,
                        const struct clt_loader_stats *lbefore)
{
    const struct clt_ctx_stats *now = &e->stats;
    long loader = now->host_waits[CLT_WAIT_LOADER] - before->host_waits[CLT_WAIT_LOADER];
    printf("host waits %ld (", now->host_waits_total - before->host_waits_total - loader);
    bool first = true;
    for (int r = 0; r < CLT_WAIT__COUNT; r++) {
        long n = now->host_waits[r] - before->host_waits[r];
        if (!n || r == CLT_WAIT_LOADER) continue;
        printf("%s%s %ld", first ? "" : ", ", clt_wait_reason_name((clt_wait_reason)r), n);
        first = false;
    }
    printf(")");
    if (e->loader.uploads > lbefore->uploads || loader)
        printf("; loader thread waits %ld (%.2f s), batch stall %.2f s", loader,
               e->loader.wait_s - lbefore->wait_s, e->loader.stall_s - lbefore->stall_s);
}

void cli_end_line(struct reporter *r)
{
    if (r->line_open) {
        printf("\n");
        r->line_open = false;
    }
}

/* "epoch 3/10: train loss 0.2840, test loss 0.3554, test accuracy 87.10%, 13.64 s (4398
 * samples/s), host waits 7 (log 6, eval 1)" once an epoch and its evaluation are done. */
static void print_summary(struct reporter *r, const struct clt_train_event *e,
                          const struct clt_train_event *eval)
{
    /* --quiet: the run's last summary alone, its final result */
    bool final = e->step == e->total_steps;
    if (!r->silent && (!r->quiet || final)) {
        printf("epoch %d/%d: train loss %.4f", e->epoch, e->epochs, r->epoch_loss);
        if (eval && r->text) /* nats per token, and bits per character (or byte) */
            printf(", val loss %.4f (%.4f bits per %s), val accuracy %.2f%%", eval->loss,
                   eval->loss / log(2.0), r->bytes ? "byte" : "character",
                   100.0 * eval->accuracy);
        else if (eval && isnan(eval->accuracy)) printf(", test loss %.4f", eval->loss);
        else if (eval)
            printf(", test loss %.4f, test accuracy %.2f%%", eval->loss, 100.0 * eval->accuracy);
        printf(", %.2f s (%.0f %s/s), ", r->epoch_s, r->epoch_rate, unit_of(r));
        print_waits(e, &r->last, &r->last_loader);
        printf("\n");
    }
    r->last = e->stats;
    r->last_loader = e->loader;
}

/* The starting weights' evaluation (eval_start: a language model's, before its first step),
 * nanoGPT's "step 0" line; its waits are not the first epoch's. */
static void print_start_eval(struct reporter *r, const struct clt_train_event *e)
{
    if (!r->silent && !r->quiet)
        printf("step 0: val loss %.4f (%.4f bits per %s), val accuracy %.2f%%, before "
               "training\n",
               e->loss, e->loss / log(2.0), r->bytes ? "byte" : "character",
               100.0 * e->accuracy);
    r->last = e->stats;
    r->last_loader = e->loader;
}

/* With clipping, the log line's ",\"grad_norm\":X" (a norm that is not finite, after an fp16
 * step skipped for inf/NaN, as null: JSON has no inf), else "". */
static const char *grad_norm_field(bool clipping, const struct clt_train_event *e, char *buf,
                                   size_t n)
{
    if (!clipping) return "";
    if (isfinite(e->grad_norm)) snprintf(buf, n, ",\"grad_norm\":%.6g", e->grad_norm);
    else snprintf(buf, n, ",\"grad_norm\":null");
    return buf;
}

/* The metrics file's JSON line for a log point, an epoch or an evaluation (with its newline)
 * into buf; its length, 0 for the other events. Read before print_summary moves r->last. */
static int metrics_line(const struct reporter *r, const struct clt_train_event *e, char *buf,
                        size_t n)
{
    int len = 0;
    char norm[48];
    if (e->kind == CLT_EVENT_LOG)
        len = snprintf(buf, n,
                       "{\"event\":\"log\",\"epoch\":%d,\"step\":%ld,\"loss\":%.6g,\"lr\":%.6g,"
                       "\"samples_per_s\":%.1f,\"elapsed_s\":%.3f%s}\n",
                       e->epoch, e->step, e->loss, e->lr, e->samples_per_s, e->elapsed_s,
                       grad_norm_field(r->clipping, e, norm, sizeof norm));
    else if (e->kind == CLT_EVENT_EPOCH)
        len = snprintf(buf, n,
                       "{\"event\":\"epoch\",\"epoch\":%d,\"step\":%ld,\"train_loss\":%.6g,"
                       "\"epoch_s\":%.3f,\"samples_per_s\":%.1f}\n",
                       e->epoch, e->step, e->loss, e->epoch_s, e->samples_per_s);
    else if (e->kind == CLT_EVENT_EVAL)
        len = snprintf(buf, n,
                       "{\"event\":\"eval\",\"epoch\":%d,\"step\":%ld,\"test_loss\":%.6g,"
                       "\"test_accuracy\":%.6g,\"host_waits\":%ld}\n",
                       e->epoch, e->step, e->loss, isnan(e->accuracy) ? -1.0 : e->accuracy,
                       e->stats.host_waits_total - r->last.host_waits_total);
    return len > 0 && (size_t)len < n ? len : 0;
}

/* --plot: the line's points join the curves, and the figure is rewritten at every evaluation
 * (or epoch, without a test split) and at log points at most once a second: each rewrite is a
 * whole file and an fsync. A failed rewrite leaves the last one in place; the final one, when
 * the run ends (finish_plot in run.c), is the one that counts. */
static void update_plot(struct reporter *r, const struct clt_train_event *e, const char *line,
                        size_t len)
{
    char err[160];
    if (!r->plot || r->plot_oom || len == 0) return;
    if (plot_read_line(r->plot, line, len, err, sizeof err) != 0) {
        r->plot_oom = true; /* the lines are this file's own: only memory can fail */
        return;
    }
    bool due = e->kind == CLT_EVENT_EVAL || (e->kind == CLT_EVENT_EPOCH && !r->has_test) ||
               (e->kind == CLT_EVENT_LOG && (!r->plot_written || e->elapsed_s - r->plot_t >= 1));
    if (!due) return;
    struct plot_options o = {0};
    plot_svg_save(r->plot_path, r->plot, 1, &o);
    r->plot_written = true;
    r->plot_t = e->elapsed_s;
}

void cli_on_event(const struct clt_train_event *e, void *user)
{
    struct reporter *r = user;
    char eta[32], elapsed[32];
    r->last_event = *e;
    r->last_event.path = r->last_event.message = NULL; /* valid during the call only */
    r->have_event = true;
    /* Seconds per step: since the first report, or at that report its own rate, unless
     * programs were built (compiled, or loaded from the disk cache, which a driver may still
     * compile at the first launch) before it: then that rate is mostly the build's, and the
     * first line has no estimate ("ETA -"). */
    bool first = !r->eta_set && (e->kind == CLT_EVENT_LOG || e->kind == CLT_EVENT_EPOCH);
    if (first) {
        r->eta_set = true;
        r->eta_step = e->step;
        r->eta_t = e->elapsed_s;
    }
    bool built = e->stats.compiles + e->stats.disk_cache_hits > r->builds;
    double per_step = e->step > r->eta_step
                          ? (e->elapsed_s - r->eta_t) / (double)(e->step - r->eta_step)
                      : e->samples_per_s > 0 && !(first && built)
                          ? (double)e->batch_size * (e->accumulate > 1 ? e->accumulate : 1) /
                                e->samples_per_s
                          : -1;
    double left = (double)(e->total_steps - e->step) * per_step;
    if (per_step < 0 && e->step < e->total_steps) snprintf(eta, sizeof eta, "-");
    else fmt_duration(left, eta, sizeof eta);
    fmt_duration(e->elapsed_s, elapsed, sizeof elapsed);
    char line[512];
    int len = metrics_line(r, e, line, sizeof line);
    if (len > 0 && r->metrics) fputs(line, r->metrics);
    update_plot(r, e, line, len > 0 ? (size_t)len - 1 : 0); /* without the newline */
    switch (e->kind) {
    case CLT_EVENT_LOG:
        if (r->quiet) break;
        if (r->tty) {
            printf("\r\033[Kepoch %d/%d  step %ld/%ld  loss %.4f  %.0f %s/s  ETA %s", e->epoch,
                   e->epochs, e->step, e->total_steps, e->loss, e->samples_per_s, unit_of(r), eta);
            if (e->precision == CLT_DTYPE_F16) printf("  skipped %ld", e->skipped);
            if (r->clipping) printf("  grad norm %.4g", e->grad_norm);
            r->line_open = true;
        } else {
            printf("epoch %d/%d step %ld/%ld loss %.4f lr %.3g %.0f %s/s elapsed %s ETA %s",
                   e->epoch, e->epochs, e->step, e->total_steps, e->loss, e->lr, e->samples_per_s,
                   unit_of(r), elapsed, eta);
            if (e->precision == CLT_DTYPE_F16) /* loss scaling */
                printf(" skipped %ld scale %g", e->skipped, e->loss_scale);
            if (r->clipping) printf(" grad_norm %.4g", e->grad_norm);
            printf("\n");
        }
        break;
    case CLT_EVENT_EPOCH:
        cli_end_line(r);
        r->epoch_loss = e->loss;
        r->epoch_s = e->epoch_s;
        r->epoch_rate = e->samples_per_s;
        if (!r->has_test) print_summary(r, e, NULL);
        break;
    case CLT_EVENT_EVAL:
        if (e->epoch == 0) print_start_eval(r, e);
        else print_summary(r, e, e);
        break;
    case CLT_EVENT_SAVE:
        cli_end_line(r);
        if (!r->quiet) printf("saved %s (step %ld)\n", e->path, e->step);
        break;
    case CLT_EVENT_BACKOFF:
        /* printed even with --quiet: the run's batch is not the one asked for */
        cli_end_line(r);
        r->backoff_batch = e->batch_size;
        printf("auto-batch: %s; retrying with micro-batch %zu x accumulate %d (effective batch "
               "%zu)\n",
               e->message, e->batch_size, e->accumulate, e->batch_size * (size_t)e->accumulate);
        break;
    }
    if (r->metrics && !r->metrics_failed) {
        errno = 0;
        if (fflush(r->metrics) != 0 || ferror(r->metrics)) {
            r->metrics_failed = true;
            r->metrics_errno = errno;
        }
    }
    fflush(stdout);
}
