/* `cltrain devices`: every OpenCL platform and device as a table (or JSON), marking the one the
 * selector picks; `cltrain selfcheck`: builds a kernel on the chosen device and round-trips a
 * tensor through it. */
#include "cli/cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses "--device SEL" / "--device=SEL" and "--json"; returns CLI_OK or a usage error. */
static int parse_args(int argc, char **argv, const char **device, int *json)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (json && strcmp(a, "--json") == 0) {
            *json = 1;
        } else if (strcmp(a, "--device") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error("--device needs a selector, e.g. --device gpu");
            *device = argv[++i];
        } else if (strncmp(a, "--device=", 9) == 0) {
            *device = a + 9;
        } else {
            return cli_usage_error("unknown option \"%s\" for this command; try: cltrain --help",
                                   a);
        }
    }
    return CLI_OK;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void print_json(const clt_device_info *d, int n, int pick, const char *selector)
{
    printf("{\"selector\": ");
    json_string(selector);
    printf(", \"selected\": %d, \"devices\": [", pick >= 0 ? d[pick].index : -1);
    for (int i = 0; i < n; i++) {
        printf("%s\n  {\"index\": %d, \"platform_index\": %d, \"device_index\": %d, \"platform\": ",
               i ? "," : "", d[i].index, d[i].platform_index, d[i].device_index);
        json_string(d[i].platform_name);
        printf(", \"name\": ");
        json_string(d[i].device_name);
        printf(", \"type\": \"%s\", \"compute_units\": %u, \"clock_mhz\": %u, "
               "\"global_mem\": %" PRIu64 ", \"max_alloc\": %" PRIu64 ", \"local_mem\": %" PRIu64
               ", \"fp16\": %s, \"fp64\": %s, \"opencl_c\": ",
               clt_device_type_name(d[i].type), d[i].compute_units, d[i].clock_mhz,
               d[i].global_mem, d[i].max_alloc, d[i].local_mem, d[i].fp16 ? "true" : "false",
               d[i].fp64 ? "true" : "false");
        json_string(d[i].opencl_c_version);
        printf(", \"driver\": ");
        json_string(d[i].driver_version);
        printf(", \"selected\": %s}", i == pick ? "true" : "false");
    }
    printf("\n]}\n");
}

static void print_table(const clt_device_info *d, int n, int pick, const char *selector)
{
    printf("  %-3s %-5s %-28s %-40s %-11s %4s %6s %10s %10s %9s %4s %4s %-14s %s\n", "#", "P:D",
           "platform", "device", "type", "CUs", "MHz", "memory", "max alloc", "local", "fp16",
           "fp64", "OpenCL C", "driver");
    for (int i = 0; i < n; i++) {
        char mem[32], alloc[32], local[32], pd[16];
        clt_format_bytes(d[i].global_mem, mem, sizeof mem);
        clt_format_bytes(d[i].max_alloc, alloc, sizeof alloc);
        clt_format_bytes(d[i].local_mem, local, sizeof local);
        snprintf(pd, sizeof pd, "%d:%d", d[i].platform_index, d[i].device_index);
        printf("%c %-3d %-5s %-28.28s %-40.40s %-11s %4u %6u %10s %10s %9s %4s %4s %-14.14s %s\n",
               i == pick ? '*' : ' ', d[i].index, pd, d[i].platform_name, d[i].device_name,
               clt_device_type_name(d[i].type), d[i].compute_units, d[i].clock_mhz, mem, alloc,
               local, d[i].fp16 ? "yes" : "no", d[i].fp64 ? "yes" : "no", d[i].opencl_c_version,
               d[i].driver_version);
    }
    printf(
        "* = the device \"%s\" picks (auto: the best GPU, else accelerator, else CPU; by compute "
        "units x clock, then memory)\n",
        selector);
}

int cli_devices(int argc, char **argv)
{
    const char *device = NULL;
    int json = 0, pick = -1, n = 0, rc = parse_args(argc, argv, &device, &json);
    clt_device_info *devs = NULL;
    if (rc != CLI_OK) return rc;
    const char *selector = device ? device : clt_device_default_selector();
    if (clt_device_list(&devs, &n) != CLT_OK) return cli_error("%s", clt_last_errmsg());
    if (clt_device_select(devs, n, selector, &pick) != CLT_OK) {
        free(devs);
        return cli_error("%s", clt_last_errmsg());
    }
    if (json) print_json(devs, n, pick, selector);
    else print_table(devs, n, pick, selector);
    free(devs);
    return CLI_OK;
}

int cli_selfcheck(int argc, char **argv)
{
    const char *device = NULL;
    int rc = parse_args(argc, argv, &device, NULL);
    if (rc != CLI_OK) return rc;
    struct clt_ctx_params p = clt_ctx_default_params();
    p.device = device;
    clt_ctx *ctx = NULL;
    if (clt_ctx_create(&ctx, &p) != CLT_OK) return cli_error("%s", clt_last_errmsg());
    if (clt_ctx_selfcheck(ctx) != CLT_OK) {
        rc = cli_error("self-check failed: %s", clt_ctx_errmsg(ctx));
    } else {
        struct clt_ctx_stats s = clt_ctx_stats(ctx);
        const char *cache = clt_ctx_cache_dir(ctx);
        printf("self-check passed on [%d] %s: programs compiled %ld, loaded from the disk cache "
               "%ld (%s); 1000 floats round-tripped bit-identical through scale and axpy\n",
               clt_ctx_device(ctx)->index, clt_ctx_device(ctx)->device_name, s.compiles,
               s.disk_cache_hits, cache ? cache : "disk cache off");
    }
    clt_ctx_free(ctx);
    return rc;
}
