/* `cltrain kernels`, a developer command behind the kernel portability guard
 * (tests/portability/kernel_guard.py): --list prints every program the library may build on a
 * device profile, --source prints a program's complete source as the library compiles it. */
#include "cli/cli.h"

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

static void usage(FILE *f)
{
    fputs("usage: cltrain kernels --list [--profile gpu|small-gpu|cpu | --device SEL]\n"
          "       cltrain kernels --source FILES\n"
          "  --list     every program the library may build, one per line:\n"
          "             FILES<TAB>OPTIONS<TAB>COMPLETE OPTIONS (with the device defines)\n"
          "  --profile  a synthetic device (default gpu); --device: a real one\n"
          "  --source   the complete source of the program FILES (e.g. rng,dropout)\n",
          f);
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
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return CLI_OK;
        } else if (strcmp(a, "--list") == 0) {
            list = true;
        } else if (strcmp(a, "--profile") == 0 && has_value) {
            prof = argv[++i];
        } else if (strcmp(a, "--device") == 0 && has_value) {
            device = argv[++i];
        } else if (strcmp(a, "--source") == 0 && has_value) {
            source = argv[++i];
        } else {
            return cli_usage_error("kernels: unknown or incomplete option \"%s\"; try: cltrain "
                                   "kernels --help", a);
        }
    }
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
        int rc = list_for_device(device);
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
