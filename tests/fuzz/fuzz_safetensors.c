/* libFuzzer harness: the safetensors reader (clt_st_open) on arbitrary bytes, then every
 * lookup over what it accepted, reading every tensor's bytes so that an entry pointing outside
 * the file shows up under AddressSanitizer. Host only; no OpenCL. */
#include "io/safetensors_internal.h"

#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    clt_st_file *f = NULL;
    if (clt_st_open(&f, fuzz_file(0, data, size)) != CLT_OK) return 0;
    volatile unsigned sum = 0;
    for (int i = 0; i < clt_st_count(f); i++) {
        const clt_st_tensor *t = clt_st_get(f, i);
        if (!t || clt_st_find(f, t->name) != t) abort(); /* names are unique: find gives it back */
        const unsigned char *p = t->data;
        for (size_t b = 0; b < t->nbytes; b++) sum += p[b];
    }
    if (clt_st_get(f, -1) || clt_st_get(f, clt_st_count(f))) abort();
    for (int i = 0; i < clt_st_meta_count(f); i++) {
        const char *key = clt_st_meta_key(f, i), *value = key ? clt_st_meta(f, key) : NULL;
        if (!value) abort();
        sum += (unsigned)strlen(value);
    }
    clt_st_close(f);
    return 0;
}
