/* libFuzzer harness: the checkpoint loader on arbitrary bytes, as --resume/eval
 * (clt_checkpoint_open) and as --init (clt_checkpoint_open_weights), then the queries that need
 * no device: the metadata, the optimizer text, the scaler check, the --resume geometry check
 * and the host halves of loading the weights, the batchnorm buffers and the optimizer state into
 * the model the file's spec plans (clt__checkpoint_read_model, _read_optim_state: every
 * tensor's dtype and shape, and the domain checks, finite values and variances not negative).
 * A plain state dict is loaded into "linear 2" on 3 features. Each input is opened twice: as
 * given (which a mutated cltrain file rarely passes: its "crc32c_metadata" and the tensors'
 * "crc32c" no longer match) and, when it parses as safetensors, re-signed as cltrain would write
 * it (every tensor's CRC-32C in "crc32c" when the file has that key and its tensor names need no
 * JSON escape, then "crc32c_metadata"), so that the checks behind the checksums are fuzzed too.
 * Host only. */
#include "cltrain/checkpoint.h"

#include "cltrain/spec.h"

#include "fuzz_common.h"
#include "io/crc32c.h"
#include "io/safetensors_internal.h"
#include "nn/layer_internal.h"
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

/* The plan of the model the file's spec describes (a plain file's: "linear 2" on 3 features),
 * as cltrain builds it before loading the weights. */
static clt_status plan_of(const clt_checkpoint *ck, struct clt__plan *plan)
{
    struct clt_checkpoint_info info = clt_checkpoint_get_info(ck);
    bool plain = clt_checkpoint_is_plain(ck);
    int outputs = plain ? 2 : info.task == CLT_TASK_CLASSIFICATION ? info.classes : 1;
    struct clt__shape in = {1, {plain ? 3 : info.norm.features, 0, 0}};
    clt_spec spec = {0, NULL};
    memset(plan, 0, sizeof *plan);
    for (int d = 0; !plain && d < 3 && info.input_shape[d]; d++) {
        in.ndim = d + 1;
        in.d[d] = info.input_shape[d];
    }
    clt_status st = clt_spec_parse(plain ? "linear 2" : info.model_text, outputs, &spec);
    if (st == CLT_OK) st = clt__model_plan(&spec, &in, (size_t)outputs, CLT_DTYPE_F32, plan);
    clt_spec_free(&spec);
    return st;
}

/* Loads the tensors into host memory laid out by the plan. A model larger than the file cannot
 * be in it: such a plan is skipped, not allocated (every tensor is checked against the file's
 * before a byte is copied, so nothing is lost). */
static void load(const clt_checkpoint *ck, size_t file_size)
{
    struct clt__plan plan;
    struct clt_param_info *pis = NULL;
    struct clt_buffer_info *bis = NULL;
    float *host = NULL, *bhost = NULL;
    int64_t *chost = NULL;
    if (plan_of(ck, &plan) != CLT_OK || plan.total > file_size / 4 ||
        plan.buffer_total > file_size / 4 || plan.counters > file_size / 8)
        goto done;
    pis = calloc((size_t)plan.nparams + 1, sizeof *pis);
    bis = calloc((size_t)plan.nbuffers + 1, sizeof *bis);
    host = calloc(plan.total + 1, sizeof *host);
    bhost = calloc(plan.buffer_total + 1, sizeof *bhost);
    chost = calloc(plan.counters + 1, sizeof *chost);
    if (!pis || !bis || !host || !bhost || !chost) goto done;
    for (int i = 0; i < plan.nparams; i++) pis[i] = plan.params[i].info;
    for (int i = 0; i < plan.nbuffers; i++) bis[i] = plan.buffers[i].info;
    (void)clt__checkpoint_read_model(ck, pis, plan.nparams, bis, plan.nbuffers, host, bhost,
                                     chost);
    static const char *const states[] = {"exp_avg", "exp_avg_sq", "momentum_buffer"};
    for (size_t k = 0; k < sizeof states / sizeof *states; k++)
        (void)clt__checkpoint_read_optim_state(ck, states[k], pis, plan.nparams, host);
done:
    clt__plan_free(&plan);
    free(pis);
    free(bis);
    free(host);
    free(bhost);
    free(chost);
}

static void open_both(const char *path, size_t size)
{
    clt_checkpoint *ck = NULL;
    if (clt_checkpoint_open(&ck, path) == CLT_OK) {
        query(ck);
        load(ck, size);
    }
    clt_checkpoint_close(ck);
    ck = NULL;
    if (clt_checkpoint_open_weights(&ck, path) == CLT_OK) {
        query(ck);
        load(ck, size);
    }
    clt_checkpoint_close(ck);
}

/* Every tensor's CRC-32C as the JSON object cltrain writes as "crc32c" (malloc'ed), or NULL when
 * a name would need escaping (then the file's own value is kept). */
static char *tensor_crcs(const clt_st_tensor *ts, int n)
{
    size_t cap = 3, used = 0;
    for (int i = 0; i < n; i++) {
        for (const char *c = ts[i].name; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) return NULL;
        cap += strlen(ts[i].name) + 16;
    }
    char *json = malloc(cap);
    if (!json) return NULL;
    json[used++] = '{';
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(json + used, cap - used, "%s\"%s\":\"%08" PRIx32 "\"",
                                 i ? "," : "", ts[i].name,
                                 clt__crc32c(0, ts[i].data, ts[i].nbytes));
    snprintf(json + used, cap - used, "}");
    return json;
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
    char hex[16], *crcs = NULL;
    if (!ts || !keys || !vals) goto done;
    for (int i = 0; i < n; i++)
        ts[i] = *clt_st_get(f, i);
    for (int i = 0; i < nm; i++) {
        const char *key = clt_st_meta_key(f, i);
        if (strcmp(key, "crc32c_metadata") == 0) continue;
        keys[k] = key;
        vals[k] = clt_st_meta(f, key);
        if (strcmp(key, "crc32c") == 0 && (crcs = tensor_crcs(ts, n)) != NULL) vals[k] = crcs;
        k++;
    }
    if (clt__checkpoint_meta_crc32c(keys, vals, k, &crc) != CLT_OK) goto done;
    snprintf(hex, sizeof hex, "%08" PRIx32, crc);
    keys[k] = "crc32c_metadata";
    vals[k++] = hex;
    ok = clt_st_write(signed_path, ts, n, keys, vals, k) == CLT_OK;
done:
    free(crcs);
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
    open_both(path, size);
    if (resign(path)) open_both(signed_path, size + 4096); /* the re-signed metadata may grow */
    return 0;
}
