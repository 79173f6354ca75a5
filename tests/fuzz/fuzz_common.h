/* Shared by the libFuzzer harnesses: the readers under test take a path, so each input is
 * written to an anonymous in-memory file (memfd, one per slot, created once and reused) that
 * the reader opens as /proc/self/fd/N. Nothing here touches OpenCL. */
#ifndef CLTRAIN_FUZZ_COMMON_H
#define CLTRAIN_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define FUZZ_SLOTS 2

/* Replaces the contents of in-memory file `slot` (0 .. FUZZ_SLOTS - 1) with the n bytes at
 * data and returns its path (static storage, valid for the life of the process). Aborts if the
 * file cannot be created or written: that is a harness failure, not a finding. */
const char *fuzz_file(int slot, const uint8_t *data, size_t n);

/* A little-endian u32 at p (for harnesses that split one input into several files). */
static inline uint32_t fuzz_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
