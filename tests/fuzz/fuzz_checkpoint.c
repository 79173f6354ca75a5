/* libFuzzer harness: the checkpoint loader on arbitrary bytes, as --resume/eval
 * (clt_checkpoint_open) and as --init (clt_checkpoint_open_weights), then the queries that need
 * no device: the metadata, the optimizer text, the scaler check and the --resume geometry
 * check. Each input is opened twice: as given (which a mutated cltrain file rarely passes: its
 * "crc32c_metadata" no longer matches) and, when it parses as safetensors, re-signed with the
 * metadata checksum cltrain would write, so that the metadata's parsing and cross-checks behind
 * the checksum are fuzzed too. Loading weights into a model needs a ctx and is not fuzzed here.
 * Host only. */
#include "cltrain/checkpoint.h"

#include "fuzz_common.h"
#include "io/safetensors_internal.h"
#include "train/train_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256], signed_path[300];

static void remove_dir(void)
{
    unlink(signed_path);
    rmdir(dir);
}

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

static void open_both(const char *path)
{
    clt_checkpoint *ck = NULL;
    if (clt_checkpoint_open(&ck, path) == CLT_OK) query(ck);
    clt_checkpoint_close(ck);
    ck = NULL;
    if (clt_checkpoint_open_weights(&ck, path) == CLT_OK) query(ck);
    clt_checkpoint_close(ck);
}

/* Writes the file at `path` again, to signed_path, with "crc32c_metadata" set to its metadata's
 * checksum; false when it does not parse as safetensors (nothing to re-sign). */
static bool resign(const char *path)
{
    clt_st_file *f = NULL;
    bool ok = false;
    if (clt_st_open(&f, path) != CLT_OK) return false;
    int n = clt_st_count(f), nm = clt_st_meta_count(f), k = 0;
    clt_st_tensor *ts = malloc((size_t)(n ? n : 1) * sizeof *ts);
    const char **keys = malloc((size_t)(nm + 1) * sizeof *keys),
               **vals = malloc((size_t)(nm + 1) * sizeof *vals);
    uint32_t crc = 0;
    char hex[16];
    if (!ts || !keys || !vals) goto done;
    for (int i = 0; i < n; i++)
        ts[i] = *clt_st_get(f, i);
    for (int i = 0; i < nm; i++) {
        const char *key = clt_st_meta_key(f, i);
        if (strcmp(key, "crc32c_metadata") == 0) continue;
        keys[k] = key;
        vals[k++] = clt_st_meta(f, key);
    }
    if (clt__checkpoint_meta_crc32c(keys, vals, k, &crc) != CLT_OK) goto done;
    snprintf(hex, sizeof hex, "%08" PRIx32, crc);
    keys[k] = "crc32c_metadata";
    vals[k++] = hex;
    ok = clt_st_write(signed_path, ts, n, keys, vals, k) == CLT_OK;
done:
    free(ts);
    free(keys);
    free(vals);
    clt_st_close(f);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        /* memory-backed when possible: every re-signed input is written, synced and renamed */
        const char *tmp = getenv("TMPDIR");
        if (!tmp || !*tmp) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/cltrain-fuzz-XXXXXX", tmp);
        if (!mkdtemp(dir)) abort(); /* a harness failure, not a finding */
        snprintf(signed_path, sizeof signed_path, "%s/signed.safetensors", dir);
        atexit(remove_dir);
    }
    const char *path = fuzz_file(0, data, size);
    open_both(path);
    if (resign(path)) open_both(signed_path);
    return 0;
}
