/* libFuzzer harness: the IDX reader (clt_data_load_idx; each file gzip or raw). One input holds
 * both files: a little-endian u32 L, then L bytes of the images file (fewer if the input ends),
 * then the labels file. Bit 31 of L asks for 10 fixed classes. Host only; no OpenCL. */
#include "cltrain/data.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    uint32_t head = fuzz_le32(data);
    size_t rest = size - 4, images = head & 0x7fffffffu;
    if (images > rest) images = rest;
    struct clt_data_params p = clt_data_default_params();
    if (head >> 31) p.classes = 10;
    const char *ipath = fuzz_file(0, data + 4, images);
    const char *lpath = fuzz_file(1, data + 4 + images, rest - images);
    clt_dataset d;
    if (clt_data_load_idx(ipath, lpath, &p, &d) == CLT_OK) {
        volatile unsigned sum = 0;
        for (size_t i = 0; i < d.n; i++) sum += (unsigned)d.labels[i] + d.u8[i * d.features];
        if (d.n == 0 || d.features != d.sample_shape[1] * d.sample_shape[2]) __builtin_trap();
    }
    clt_dataset_free(&d);
    return 0;
}
