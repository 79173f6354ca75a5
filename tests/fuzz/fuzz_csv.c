/* libFuzzer harness: the CSV reader (clt_data_load_csv; gzip or raw) on arbitrary bytes, twice:
 * with the defaults (classification, label in the last column) and as regression with the
 * label in the first column. Host only; no OpenCL. */
#include "cltrain/data.h"

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void load(const char *path, const struct clt_data_params *p)
{
    clt_dataset d;
    if (clt_data_load_csv(path, p, &d) == CLT_OK) {
        volatile float sum = 0;
        for (size_t i = 0; i < d.n * d.features; i++) sum += d.f32[i];
        for (size_t i = 0; i < d.n; i++) sum += d.labels ? (float)d.labels[i] : d.targets[i];
        if (d.feature_names)
            for (size_t f = 0; f < d.features; f++) sum += (float)d.feature_names[f][0];
    }
    clt_dataset_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file(0, data, size);
    struct clt_data_params p = clt_data_default_params();
    load(path, &p);
    p.task = CLT_TASK_REGRESSION;
    p.label_column = 0;
    load(path, &p);
    return 0;
}
