/* `cltrain devices`: every OpenCL platform and device as a table (or JSON), marking the one the
 * selector picks; `cltrain selfcheck`: builds a kernel on the chosen device and round-trips a
 * tensor through it. */
#include "cli/cli.h"
#include "cli/options.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    bool json = false;
    int pick = -1, n = 0;
    const struct cli_opt opts[] = {
        {"json", OPT_FLAG, &json, "print the list as JSON", NULL},
        {"device", OPT_STR, &device,
         "mark the device SEL picks instead of the default selector's (auto, gpu, cpu, "
         "accelerator, N, P:D or a name)",
         NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (cli_is_help(argc, argv)) {
        cli_print_help("devices", "cltrain devices [--json] [--device SEL]", opts);
        return CLI_OK;
    }
    clt_device_info *devs = NULL;
    int rc = cli_parse(argc, argv, opts, "devices");
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
    const struct cli_opt opts[] = {
        {"device", OPT_STR, &device,
         "the device to check (default: $CLTRAIN_DEVICE, else auto): auto, gpu, cpu, "
         "accelerator, N, P:D or a name",
         NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (cli_is_help(argc, argv)) {
        cli_print_help("selfcheck", "cltrain selfcheck [--device SEL]", opts);
        return CLI_OK;
    }
    int rc = cli_parse(argc, argv, opts, "selfcheck");
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
