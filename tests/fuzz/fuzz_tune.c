/* libFuzzer harness: the tuning-file reader (clt_tune_load) for a synthetic device (no OpenCL
 * objects: device "fuzz-gpu", driver "1.0"; seed files name it so that their gemm choices are
 * reached and checked against its limits). Host only. */
#include "ops/tune_internal.h"

#include "fuzz_common.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static clt_device_info dev;
    if (!dev.compute_units) {
        dev.type = CLT_DEVICE_GPU;
        strcpy(dev.platform_name, "fuzz");
        strcpy(dev.platform_version, "OpenCL 3.0 fuzz");
        strcpy(dev.device_name, "fuzz-gpu");
        strcpy(dev.vendor, "fuzz");
        strcpy(dev.driver_version, "1.0");
        strcpy(dev.opencl_c_version, "OpenCL C 1.2");
        dev.compute_units = 16;
        dev.clock_mhz = 1000;
        dev.global_mem = (uint64_t)4 << 30;
        dev.max_alloc = (uint64_t)1 << 30;
        dev.local_mem = 32 << 10;
        dev.max_work_group = 256;
    }
    struct clt_tune t;
    (void)clt_tune_load(fuzz_file(0, data, size), &dev, &t);
    return 0;
}
