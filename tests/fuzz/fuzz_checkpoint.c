/* libFuzzer harness: the checkpoint loader on arbitrary bytes, as --resume/eval
 * (clt_checkpoint_open) and as --init (clt_checkpoint_open_weights), then the queries that need
 * no device: the metadata, the optimizer text, the scaler check and the --resume geometry
 * check. Loading weights into a model needs a ctx and is not fuzzed here. Host only. */
#include "cltrain/checkpoint.h"

#include "fuzz_common.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void query(const clt_checkpoint *ck)
{
    struct clt_checkpoint_info info = clt_checkpoint_get_info(ck);
    volatile size_t sum = 0;
    if (info.model_text) sum += strlen(info.model_text);
    const char *opt = clt_checkpoint_optimizer(ck);
    if (opt) sum += strlen(opt);
    sum += clt_checkpoint_has_checksums(ck) + clt_checkpoint_is_plain(ck);
    (void)clt_checkpoint_load_scaler(ck, NULL);
    struct clt_run_geometry now = {.present = true, .batch_size = 128, .accumulate = 1,
                                   .steps_per_epoch = 8, .total_steps = 16, .epochs = 2,
                                   .dropout_seed = 42, .data_samples = 1000,
                                   .data_crc32c = 0x12345678u};
    strcpy(now.data_name, "csv:train.csv");
    (void)clt_checkpoint_check_run(ck, &now);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(0, data, size);
    clt_checkpoint *ck = NULL;
    if (clt_checkpoint_open(&ck, path) == CLT_OK) query(ck);
    clt_checkpoint_close(ck);
    ck = NULL;
    if (clt_checkpoint_open_weights(&ck, path) == CLT_OK) query(ck);
    clt_checkpoint_close(ck);
    return 0;
}
