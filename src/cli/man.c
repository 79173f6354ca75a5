/* The roff writer of the generated regions of the manual pages (see cli/man.h). */
#include "cli/man.h"

#include <stdbool.h>

#define MARKER_NOTE "edit the tables in the code, then run tools/gen_man.sh"

void man_region_begin(FILE *f, const char *region)
{
    fprintf(f, ".\\\" BEGIN GENERATED %s: %s\n", region, MARKER_NOTE);
}

void man_region_end(FILE *f, const char *region)
{
    fprintf(f, ".\\\" END GENERATED %s\n", region);
}

static bool is_lower_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One character of text, escaped for roff. */
static void put_escaped(FILE *f, char c)
{
    if (c == '\\') fputs("\\e", f);
    else if (c == '-') fputs("\\-", f);
    else fputc(c, f);
}

/* A line must not start with a control character ('.' or '\'') to stay text. */
static void guard_line_start(FILE *f, const char *s)
{
    if (s[0] == '.' || s[0] == '\'') fputs("\\&", f);
}

void man_text(FILE *f, const char *text)
{
    guard_line_start(f, text);
    for (const char *p = text; *p; p++) {
        bool starts_flag = p[0] == '-' && p[1] == '-' && p[2] >= 'a' && p[2] <= 'z' &&
                           (p == text || !(is_lower_word(p[-1]) || p[-1] == '-'));
        if (!starts_flag) {
            put_escaped(f, *p);
            continue;
        }
        fputs("\\fB", f);
        while (*p == '-' || is_lower_word(*p)) put_escaped(f, *p++);
        fputs("\\fP", f);
        p--;
    }
    fputc('\n', f);
}

void man_syntax(FILE *f, const char *syntax)
{
    char font = 'R'; /* the font the text is in now */
    guard_line_start(f, syntax);
    for (const char *p = syntax; *p; p++) {
        if (p == syntax || p[-1] == ' ') fputs("\\%", f); /* words of a spec are not hyphenated */
        char want = is_lower_word(*p) || *p == '.' ? 'B' : *p >= 'A' && *p <= 'Z' ? 'I' : 'R';
        if (*p == ' ') want = font; /* a space looks the same in every font */
        if (want != font) fputs(want == 'R' ? "\\fR" : want == 'B' ? "\\fB" : "\\fI", f);
        font = want;
        put_escaped(f, *p);
    }
    if (font != 'R') fputs("\\fR", f);
    fputc('\n', f);
}

void man_option(FILE *f, const char *name, const char *metavar, const char *help)
{
    fputs(".TP\n\\fB\\-\\-", f);
    for (const char *p = name; *p; p++) put_escaped(f, *p);
    fputs("\\fP", f);
    if (metavar) {
        fputs(" \\fI", f);
        for (const char *p = metavar; *p; p++) put_escaped(f, *p);
        fputs("\\fP", f);
    }
    fputc('\n', f);
    man_text(f, help);
}
