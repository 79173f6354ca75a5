/* libFuzzer harness: the model-spec parser (clt_spec_parse, in memory) on arbitrary text, then
 * validation, the output check and the documented round trip: the canonical text of a parsed
 * spec parses back to the same spec, field for field (a difference aborts). Host only. */
#include "cltrain/spec.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same(const clt_spec *a, const clt_spec *b)
{
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++) {
        const clt_layer_spec *x = &a->layers[i], *y = &b->layers[i];
        if (x->kind != y->kind || x->out != y->out || x->bias != y->bias || x->p != y->p ||
            x->alpha != y->alpha || x->k != y->k || x->stride != y->stride || x->pad != y->pad ||
            x->body_n != y->body_n)
            return 0;
        if (x->body_n > 0) {
            const clt_spec xb = {x->body_n, x->body}, yb = {y->body_n, y->body};
            if (!same(&xb, &yb)) return 0;
        }
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    clt_spec s = {0}, back = {0};
    char *canon = NULL;
    if (clt_spec_parse(text, 10, &s) == CLT_OK) {
        (void)clt_spec_validate(&s, 784, 10);
        (void)clt_spec_check_output(&s);
        if (clt_spec_to_string(&s, &canon) == CLT_OK) {
            if (clt_spec_parse(canon, 10, &back) != CLT_OK || !same(&s, &back)) abort();
        }
    }
    free(canon);
    clt_spec_free(&back);
    clt_spec_free(&s);
    free(text);
    return 0;
}
