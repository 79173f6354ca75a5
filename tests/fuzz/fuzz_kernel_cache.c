/* libFuzzer harness: the kernel cache's reading of a cached binary, without a device: the file
 * is read as cache_load reads it (clt__read_file with a size cap) and validated by
 * clt__cache_file_ok (magic, key, length, hash) for a fixed key. Building the binary
 * (clCreateProgramWithBinary) needs a ctx and is not fuzzed here. Host only. */
#include "runtime/internal.h"
#include "runtime/program_internal.h"

#include "fuzz_common.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The key of the seed files in tests/fuzz/corpus/kernel_cache/. */
static const uint64_t key[2] = {0x0123456789abcdefull, 0xfedcba9876543210ull};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len = 0;
    unsigned char *bytes = (unsigned char *)clt__read_file(fuzz_file(0, data, size), 1 << 20, &len);
    if (!bytes) {
        if (size <= 1 << 20) abort(); /* a regular file under the cap must read */
        return 0;
    }
    if (len != size || bytes[len] != '\0') abort();
    (void)clt__cache_file_ok(bytes, len, key);
    free(bytes);
    return 0;
}
