/* The training-curve figure as SVG, written by hand: a title, a legend naming each run in its
 * colour, and four panels (train loss, test loss, test accuracy, learning rate) that share one
 * step axis, each with ticks, tick labels, axis labels and a light grid. Curves are <path>s
 * (class "curve"), broken at gaps; long series are thinned to the lowest and highest point of
 * each pixel column, which draws the same picture. */
#include "cli/plot.h"

#include "cltrain/outfile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    FIG_W = 960,
    PANEL_W = 480, /* two panels a row */
    PANEL_H = 290,
    /* the plot area inside a panel */
    AREA_X = 76,
    AREA_Y = 30,
    AREA_W = PANEL_W - AREA_X - 22,
    AREA_H = PANEL_H - AREA_Y - 50,
    LEGEND_Y = 46,  /* the first legend row's baseline */
    LEGEND_ROW = 20,
    LEGEND_NAME_MAX = 48, /* characters of a run's name shown; longer ones keep their end */
    MARKERS_MAX = 60,     /* series with at most this many points also get dots */
    THIN_PER_PIXEL = 4,   /* series with more points than this per pixel column are thinned */
    MAX_TICKS = 24
};

static const char *const text_colour = "#222222";

/* Tableau's ten colours; runs past the tenth repeat them dashed. */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define NPALETTE (int)(sizeof palette / sizeof palette[0])

static const char *const panel_title[PLOT__PANELS] = {"train loss", "test loss",
                                                      "test accuracy", "learning rate"};
static const char *const panel_ylabel[PLOT__PANELS] = {"loss", "loss", "accuracy (%)", "lr"};
static const char *const series_id[PLOT__COUNT] = {"train_loss", "test_loss", "test_accuracy",
                                                   "lr", "epoch_loss"};

/* ---- text -------------------------------------------------------------------------------- */

/* The length of the UTF-8 sequence at s (at most n bytes) and its code point; an invalid or
 * truncated sequence is one byte read as U+FFFD. */
static size_t utf8_next(const unsigned char *s, size_t n, unsigned *cp)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                            : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80; /* no overlong forms */
    unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF; /* no surrogates, <= U+10FFFF */
    *cp = 0xFFFD;
    if (len == 0 || len > n) return 1;
    if (len == 1) {
        *cp = c;
        return 1;
    }
    unsigned v = c & (0xFFu >> (len + 1));
    for (size_t i = 1; i < len; i++) {
        unsigned b = s[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return 1;
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    return len;
}

/* s as XML character data: markup characters escaped, anything XML 1.0 may not hold (control
 * characters, invalid UTF-8, U+FFFE/U+FFFF) as U+FFFD. Past max characters, the first ones are
 * dropped for "…" (a path keeps its file name). */
static void put_text(FILE *f, const char *s, size_t max)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), chars = 0, skip = 0;
    unsigned cp;
    for (size_t i = 0; i < n; i += utf8_next(u + i, n - i, &cp)) chars++;
    if (chars > max) {
        fputs("\xE2\x80\xA6", f);
        skip = chars - (max - 1);
    }
    for (size_t i = 0, k = 0; i < n; k++) {
        size_t len = utf8_next(u + i, n - i, &cp);
        if (k < skip) {
        } else if (cp == '&') {
            fputs("&amp;", f);
        } else if (cp == '<') {
            fputs("&lt;", f);
        } else if (cp == '>') {
            fputs("&gt;", f);
        } else if (cp == '"') {
            fputs("&quot;", f);
        } else if ((cp < 0x20 && cp != '\t') || cp == 0x7F || cp == 0xFFFE || cp == 0xFFFF ||
                   cp == 0xFFFD) {
            fputs("\xEF\xBF\xBD", f);
        } else {
            fwrite(u + i, 1, len, f);
        }
        i += len;
    }
}

/* The number of characters put_text shows of s (for the legend's layout). */
static size_t text_chars(const char *s, size_t max)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), chars = 0;
    unsigned cp;
    for (size_t i = 0; i < n; i += utf8_next(u + i, n - i, &cp)) chars++;
    return chars > max ? max : chars;
}

/* ---- axes -------------------------------------------------------------------------------- */

/* An axis: the range drawn (for a log axis, powers of ten: lo and hi are exponents) and its
 * ticks; step: the spacing of a linear axis's ticks (how many decimals the labels need). */
struct axis {
    double lo, hi, step;
    bool log;
    int nticks;
    double ticks[MAX_TICKS];
};

/* Ticks at 1, 2 or 5 times a power of ten, about five of them, the range widened to the ticks
 * around it. An empty range (one value) is widened around it first. */
static void axis_linear(struct axis *a, double lo, double hi)
{
    if (!(hi > lo)) {
        double d = lo == 0 ? 1 : fabs(lo) * 0.1;
        lo -= d;
        hi += d;
    }
    double raw = (hi - lo) / 5, mag = pow(10, floor(log10(raw))), r = raw / mag;
    double step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
    a->log = false;
    a->step = step;
    a->lo = floor(lo / step) * step;
    a->hi = ceil(hi / step) * step;
    a->nticks = 0;
    for (int i = 0; a->nticks < MAX_TICKS; i++) {
        double t = a->lo + i * step;
        if (t > a->hi + step * 1e-6) break;
        a->ticks[a->nticks++] = fabs(t) < step * 1e-9 ? 0.0 : t; /* never "-0" */
    }
}

/* Whole decades; a range of at most two decades also gets ticks at 2 and 5 times a power of
 * ten, a wide one labels every k-th decade. lo and hi are positive. */
static void axis_log(struct axis *a, double lo, double hi)
{
    int e0 = (int)floor(log10(lo)), e1 = (int)ceil(log10(hi));
    if (e1 <= e0) e1 = e0 + 1;
    int every = (e1 - e0 + 5) / 6;
    a->log = true;
    a->lo = e0;
    a->hi = e1;
    a->step = 0;
    a->nticks = 0;
    for (int e = e0; e <= e1 && a->nticks < MAX_TICKS; e++) {
        double p = pow(10, e);
        if ((e - e0) % every == 0) a->ticks[a->nticks++] = p;
        if (e1 - e0 <= 2 && e < e1 && a->nticks + 2 <= MAX_TICKS) {
            a->ticks[a->nticks++] = 2 * p;
            a->ticks[a->nticks++] = 5 * p;
        }
    }
}

/* Where v falls along the axis, 0 at lo and 1 at hi. */
static double axis_pos(const struct axis *a, double v)
{
    return ((a->log ? log10(v) : v) - a->lo) / (a->hi - a->lo);
}

/* A tick's label: plain decimals with as many places as the spacing needs ("0.25", "1500") for
 * labels between 0.001 and a million, else "2.5e-4"-style; a log axis's labels as their own
 * value needs. big: the largest magnitude among the axis's ticks. */
static void fmt_tick(char *dst, size_t n, double v, double step, double big)
{
    if (step <= 0) step = fabs(v);
    if (v == 0) {
        snprintf(dst, n, "0");
    } else if (big >= 1e-3 && big < 1e6) {
        int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
        snprintf(dst, n, "%.*f", dec > 9 ? 9 : dec, v);
    } else {
        int sig = (int)floor(log10(fabs(v))) - (int)floor(log10(step)) + 1;
        char tmp[48], *e, *m;
        snprintf(tmp, sizeof tmp, "%.*e", sig < 1 ? 0 : sig > 6 ? 5 : sig - 1, v);
        e = strchr(tmp, 'e');
        if (!e) {
            snprintf(dst, n, "%s", tmp);
            return;
        }
        m = e; /* drop the mantissa's trailing zeros and point: "2.0e-04" -> "2e-4" */
        while (m > tmp && m[-1] == '0') m--;
        if (m > tmp && m[-1] == '.') m--;
        int ex = atoi(e + 1);
        snprintf(dst, n, "%.*se%d", (int)(m - tmp), tmp, ex);
    }
}

/* ---- data ranges ------------------------------------------------------------------------- */

/* The series a run draws in panel k: the train-loss panel falls back to the per-epoch loss
 * when the run has no log points. */
static int drawn_kind(const struct plot_run *r, int k)
{
    if (k == PLOT_TRAIN_LOSS && r->s[PLOT_TRAIN_LOSS].n == 0) return PLOT_EPOCH_LOSS;
    return k;
}

/* Values beyond +-1e300 are left out as the non-finite ones are: the span of two of them
 * would overflow the axis's arithmetic. */
static bool in_range(double v)
{
    return fabs(v) <= 1e300; /* false for NaN and infinities */
}

static bool drawable(double v, bool log)
{
    return in_range(v) && (!log || v > 0);
}

/* Point j of s is drawn. */
static bool point_drawn(const struct plot_series *s, size_t j, bool log)
{
    return drawable(s->value[j], log) && in_range(s->step[j]);
}

/* The steps of every point in the figure; false when there is none. */
static bool step_range(const struct plot_run *runs, int n, double *lo, double *hi)
{
    bool any = false;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < PLOT__PANELS; k++) {
            const struct plot_series *s = &runs[i].s[drawn_kind(&runs[i], k)];
            for (size_t j = 0; j < s->n; j++) {
                if (!in_range(s->step[j])) continue;
                if (!any || s->step[j] < *lo) *lo = s->step[j];
                if (!any || s->step[j] > *hi) *hi = s->step[j];
                any = true;
            }
        }
    return any;
}

/* The values panel k draws; false when it has none. */
static bool value_range(const struct plot_run *runs, int n, int k, bool log, double *lo,
                        double *hi)
{
    bool any = false;
    for (int i = 0; i < n; i++) {
        const struct plot_series *s = &runs[i].s[drawn_kind(&runs[i], k)];
        for (size_t j = 0; j < s->n; j++) {
            double v = s->value[j];
            if (!point_drawn(s, j, log)) continue;
            if (!any || v < *lo) *lo = v;
            if (!any || v > *hi) *hi = v;
            any = true;
        }
    }
    return any;
}

/* ---- drawing ----------------------------------------------------------------------------- */

/* A panel's plot area on the page and its two axes. */
struct frame {
    double x, y, w, h;
    struct axis ax, ay;
};

static double px(const struct frame *fr, double step)
{
    return fr->x + fr->w * axis_pos(&fr->ax, step);
}

static double py(const struct frame *fr, double v)
{
    return fr->y + fr->h * (1 - axis_pos(&fr->ay, v));
}

/* Builds a <path>'s data, starting a new stretch after a gap. */
struct pen {
    FILE *f;
    bool down, any;
};

static void pen_to(struct pen *p, double x, double y)
{
    fprintf(p->f, "%s%c%.1f %.1f", p->any ? " " : "", p->down ? 'L' : 'M', x, y);
    p->down = p->any = true;
}

static void draw_path(FILE *f, const struct frame *fr, const struct plot_series *s, bool log)
{
    /* thinned: per pixel column the lowest and the highest point, in their order */
    bool thin = s->n > (size_t)(THIN_PER_PIXEL * fr->w);
    struct pen p = {f, false, false};
    for (size_t i = 0; i < s->n;) {
        if (!point_drawn(s, i, log)) {
            p.down = false;
            i++;
            continue;
        }
        if (i > 0 && s->step[i] < s->step[i - 1]) p.down = false;
        size_t j = i, lo = i, hi = i;
        long col = (long)px(fr, s->step[i]);
        while (thin && j + 1 < s->n && point_drawn(s, j + 1, log) && s->step[j + 1] >= s->step[j] &&
               (long)px(fr, s->step[j + 1]) == col) {
            j++;
            if (s->value[j] < s->value[lo]) lo = j;
            if (s->value[j] > s->value[hi]) hi = j;
        }
        size_t first = lo < hi ? lo : hi, second = lo < hi ? hi : lo;
        pen_to(&p, px(fr, s->step[first]), py(fr, s->value[first]));
        if (second != first) pen_to(&p, px(fr, s->step[second]), py(fr, s->value[second]));
        i = j + 1;
    }
}

/* One run's series in a panel: a path, and dots when it has few points (a single evaluation
 * is then still visible). */
static void draw_series(FILE *f, const struct frame *fr, const struct plot_series *s, int run,
                        int kind, bool log)
{
    const char *colour = palette[run % NPALETTE];
    const char *dash = run >= NPALETTE ? " stroke-dasharray=\"6 3\"" : "";
    size_t drawn = 0;
    for (size_t j = 0; j < s->n; j++) drawn += point_drawn(s, j, log);
    if (drawn == 0) return;
    fprintf(f, "<path class=\"curve\" data-run=\"%d\" data-series=\"%s\" fill=\"none\" "
               "stroke=\"%s\" stroke-width=\"1.8\" stroke-linejoin=\"round\"%s d=\"",
            run, series_id[kind], colour, dash);
    draw_path(f, fr, s, log);
    fputs("\"/>\n", f);
    if (drawn > MARKERS_MAX) return;
    for (size_t j = 0; j < s->n; j++)
        if (point_drawn(s, j, log))
            fprintf(f, "<circle class=\"marker\" data-run=\"%d\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" "
                       "fill=\"%s\"/>\n", run, px(fr, s->step[j]), py(fr, s->value[j]), colour);
}

static double largest_tick(const struct axis *a)
{
    double big = 0;
    for (int t = 0; t < a->nticks; t++)
        if (fabs(a->ticks[t]) > big) big = fabs(a->ticks[t]);
    return big;
}

/* The grid, tick marks and tick labels of both axes. */
static void draw_ticks(FILE *f, const struct frame *fr)
{
    char label[48];
    double big = largest_tick(&fr->ay);
    for (int t = 0; t < fr->ay.nticks; t++) {
        double y = py(fr, fr->ay.ticks[t]);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#e6e6e6\"/>\n", fr->x, y, fr->x + fr->w, y);
        fprintf(f, "<line class=\"tick-mark\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#333333\"/>\n", fr->x - 5, y, fr->x, y);
        fmt_tick(label, sizeof label, fr->ay.ticks[t], fr->ay.step, big);
        fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" dy=\"0.35em\" "
                   "text-anchor=\"end\">%s</text>\n", fr->x - 8, y, label);
    }
    big = largest_tick(&fr->ax);
    for (int t = 0; t < fr->ax.nticks; t++) {
        double x = px(fr, fr->ax.ticks[t]), yb = fr->y + fr->h;
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#e6e6e6\"/>\n", x, fr->y, x, yb);
        fprintf(f, "<line class=\"tick-mark\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#333333\"/>\n", x, yb, x, yb + 5);
        fmt_tick(label, sizeof label, fr->ax.ticks[t], fr->ax.step, big);
        fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                x, yb + 18, label);
    }
}

/* Panel k at (x0, y0): title, plot area, axes and every run's series, or a note that no run
 * has points for it. */
static void draw_panel(FILE *f, const struct plot_run *runs, int n, int k, double x0, double y0,
                       const struct axis *steps, bool log)
{
    struct frame fr = {.x = x0 + AREA_X, .y = y0 + AREA_Y, .w = AREA_W, .h = AREA_H, .ax = *steps};
    double lo = 0, hi = 0;
    bool any = value_range(runs, n, k, log, &lo, &hi);
    fprintf(f, "<g class=\"panel\" data-series=\"%s\">\n", series_id[k]);
    fprintf(f, "<text class=\"title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
               "font-size=\"14\" font-weight=\"bold\">%s%s</text>\n",
            fr.x + fr.w / 2, y0 + 18, panel_title[k], log ? " (log scale)" : "");
    fprintf(f, "<rect class=\"plot-area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
               "fill=\"#ffffff\" stroke=\"#333333\"/>\n", fr.x, fr.y, fr.w, fr.h);
    if (log) axis_log(&fr.ay, any ? lo : 0.1, any ? hi : 1);
    else axis_linear(&fr.ay, any ? lo : 0, any ? hi : 1);
    if (any) draw_ticks(f, &fr);
    fprintf(f, "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">step"
               "</text>\n", fr.x + fr.w / 2, fr.y + fr.h + 38);
    fprintf(f, "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 %.1f %.1f)\">%s</text>\n", x0 + 18, fr.y + fr.h / 2,
            x0 + 18, fr.y + fr.h / 2, panel_ylabel[k]);
    if (!any)
        fprintf(f, "<text class=\"no-data\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                   "fill=\"#888888\">no points</text>\n", fr.x + fr.w / 2, fr.y + fr.h / 2);
    for (int i = 0; any && i < n; i++) {
        int kind = drawn_kind(&runs[i], k);
        draw_series(f, &fr, &runs[i].s[kind], i, kind, log);
    }
    fputs("</g>\n", f);
}

/* Places legend item i after the one before at (*x, *y) (start: x 20, y LEGEND_Y): on the same
 * row while it fits the page's width, else at the start of the next. Returns its width. */
static double legend_place(const struct plot_run *r, bool first, double *x, double *y)
{
    double w = 34 + 7.0 * (double)text_chars(r->name, LEGEND_NAME_MAX) + 24;
    if (!first && *x + w > FIG_W - 20) {
        *x = 20;
        *y += LEGEND_ROW;
    }
    return w;
}

/* Where the panels start: below the legend's last row. */
static double legend_bottom(const struct plot_run *runs, int n)
{
    double x = 20, y = LEGEND_Y;
    for (int i = 0; i < n; i++) {
        double w = legend_place(&runs[i], i == 0, &x, &y);
        x += w;
    }
    return y + LEGEND_ROW;
}

/* Each run's colour and name, in rows. */
static void draw_legend(FILE *f, const struct plot_run *runs, int n)
{
    double x = 20, y = LEGEND_Y;
    fputs("<g class=\"legend\">\n", f);
    for (int i = 0; i < n; i++) {
        double w = legend_place(&runs[i], i == 0, &x, &y);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"3\"%s/>\n", x, y - 4, x + 26, y - 4, palette[i % NPALETTE],
                i >= NPALETTE ? " stroke-dasharray=\"6 3\"" : "");
        fprintf(f, "<text class=\"legend-label\" data-run=\"%d\" x=\"%.1f\" y=\"%.1f\">", i,
                x + 34, y);
        put_text(f, runs[i].name, LEGEND_NAME_MAX);
        fputs("</text>\n", f);
        x += w;
    }
    fputs("</g>\n", f);
}

void plot_svg_write(FILE *f, const struct plot_run *runs, int n, const struct plot_options *o)
{
    double top = legend_bottom(runs, n), height = top + 2 * PANEL_H + 10;
    struct axis steps;
    double lo = 0, hi = 0;
    step_range(runs, n, &lo, &hi);
    axis_linear(&steps, lo, hi);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
               "viewBox=\"0 0 %d %.0f\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" "
               "font-size=\"12\" fill=\"%s\">\n"
               "<rect class=\"background\" width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n"
               "<text class=\"figure-title\" x=\"%d\" y=\"24\" text-anchor=\"middle\" "
               "font-size=\"18\" font-weight=\"bold\">",
            FIG_W, height, FIG_W, height, text_colour, FIG_W / 2);
    put_text(f, o && o->title ? o->title : "Training curves", 120);
    fputs("</text>\n", f);
    draw_legend(f, runs, n);
    for (int k = 0; k < PLOT__PANELS; k++)
        draw_panel(f, runs, n, k, (k % 2) * PANEL_W, top + (k / 2) * PANEL_H, &steps,
                   o && o->log_loss && (k == PLOT_TRAIN_LOSS || k == PLOT_TEST_LOSS));
    fputs("</svg>\n", f);
}

int plot_svg_save(const char *path, const struct plot_run *runs, int n,
                  const struct plot_options *o)
{
    clt_outfile *f = NULL;
    if (clt_outfile_open(&f, path) != CLT_OK) return -1;
    plot_svg_write(clt_outfile_stream(f), runs, n, o);
    return clt_outfile_commit(f) == CLT_OK ? 0 : -1;
}
