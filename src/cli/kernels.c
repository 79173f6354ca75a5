/* `cltrain kernels`, a developer command behind the kernel portability guard
 * (tests/portability/kernel_guard.py): --list prints every program the library may build on a
 * device profile, --source prints a program's complete source as the library compiles it. */
#include "cli/cli.h"
#include "cli/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Synthetic devices: what a big GPU, a small GPU (oclgrind's small profile: 64 work-items,
 * 16 KiB of local memory) and a CPU device report, for the choices that depend on limits. */
static bool profile(const char *name, clt_device_info *dev)
{
    memset(dev, 0, sizeof *dev);
    snprintf(dev->device_name, sizeof dev->device_name, "profile %s", name);
    if (strcmp(name, "gpu") == 0) {
        dev->type = CLT_DEVICE_GPU;
        dev->max_work_group = 1024;
        dev->local_mem = 48 * 1024;
        dev->fp64 = true;
    } else if (strcmp(name, "small-gpu") == 0) {
        dev->type = CLT_DEVICE_GPU;
        dev->max_work_group = 64;
        dev->local_mem = 16 * 1024;
    } else if (strcmp(name, "cpu") == 0) {
        dev->type = CLT_DEVICE_CPU;
        dev->max_work_group = 4096;
        dev->local_mem = 4 * 1024 * 1024;
        dev->fp64 = true;
    } else {
        return false;
    }
    return true;
}

static void print_variant(const char *files, const char *options, void *user)
{
    char full[1024];
    clt_program_options(user, options, full, sizeof full);
    printf("%s\t%s\t%s\n", files, options, full);
}

static int list_for_device(const char *selector)
{
    clt_device_info *devs = NULL;
    int n = 0, pick = -1;
    if (clt_device_list(&devs, &n) != CLT_OK ||
        clt_device_select(devs, n, selector, &pick) != CLT_OK) {
        free(devs);
        return cli_error("%s", clt_last_errmsg());
    }
    clt_device_info dev = devs[pick];
    clt_ops_program_variants(&dev, print_variant, &dev);
    free(devs);
    return CLI_OK;
}

int cli_kernels(int argc, char **argv)
{
    const char *prof = NULL, *device = NULL, *source = NULL;
    bool list = false;
    const struct cli_opt opts[] = {
        {"list", OPT_FLAG, &list,
         "every program the library may build, one per line: FILES<TAB>OPTIONS<TAB>COMPLETE "
         "OPTIONS (with the device defines)",
         NULL},
        {"profile", OPT_STR, &prof,
         "--list: the options for a synthetic device, gpu (default), small-gpu or cpu", NULL},
        {"device", OPT_STR, &device, "--list: the options for a real device SEL instead", NULL},
        {"source", OPT_STR, &source,
         "the complete source of the program FILES (e.g. rng,dropout)", NULL},
        {NULL, OPT_FLAG, NULL, NULL, NULL}};
    if (cli_is_help(argc, argv)) {
        cli_print_help("kernels",
                       "cltrain kernels --list [--profile gpu|small-gpu|cpu | --device SEL]\n"
                       "       cltrain kernels --source FILES",
                       opts);
        return CLI_OK;
    }
    int rc = cli_parse(argc, argv, opts, "kernels");
    if (rc != CLI_OK) return rc;
    if (list == (source != NULL))
        return cli_usage_error("kernels: give either --list or --source FILES");
    if (prof && device) return cli_usage_error("kernels: give --profile or --device, not both");
    if (source) {
        char *text = NULL;
        if (clt_program_assemble(source, &text) != CLT_OK)
            return cli_error("%s", clt_last_errmsg());
        fputs(text, stdout);
        free(text);
    } else if (device) {
        rc = list_for_device(device);
        if (rc != CLI_OK) return rc;
    } else {
        clt_device_info dev;
        if (!profile(prof ? prof : "gpu", &dev))
            return cli_usage_error("kernels: --profile must be gpu, small-gpu or cpu, got \"%s\"",
                                   prof);
        clt_ops_program_variants(&dev, print_variant, &dev);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error("kernels: writing stdout failed");
    return CLI_OK;
}
