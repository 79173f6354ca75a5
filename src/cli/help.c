/* cltrain's help: the command list (`cltrain --help`), the model spec's layer kinds and presets
 * from the library's tables (`cltrain help spec`), and, for tools/gen_man.sh, the manual's
 * generated regions (`cltrain help --man-sections`): the layer kinds, the presets and every
 * command's options, written from the same tables that parse them. */
#include "cli/cli.h"
#include "cli/man.h"
#include "cli/options.h"

#include <stdio.h>
#include <string.h>

void cli_usage(FILE *f)
{
    fputs("usage: cltrain COMMAND [options]\n"
          "\n"
          "commands:\n"
          "  devices [--json] [--device SEL]   list OpenCL devices; mark the one SEL picks\n"
          "  selfcheck [--device SEL]          build a kernel and round-trip a tensor\n"
          "  train [options]                   train a model (default: MLP on Fashion-MNIST)\n"
          "  eval --load FILE [options]        loss and accuracy of a checkpoint\n"
          "  predict --load FILE [options]     predicted classes and probabilities as CSV\n"
          "  generate --load FILE [options]    text from a language model, streamed\n"
          "  bench [options]                   training steps/s on synthetic resident data\n"
          "  plot METRICS.jsonl... [-o FILE]   training curves of runs (train --metrics) as SVG\n"
          "  kernels --list | --source FILES   (developers) every program the library may\n"
          "                                    build, or one program's complete source\n"
          "  help spec                         the model spec's layers and presets\n"
          "  (COMMAND --help lists a command's options)\n"
          "\n"
          "device selectors (--device, else $CLTRAIN_DEVICE, else auto):\n"
          "  auto, gpu, cpu, accelerator, N (index as listed), P:D (platform:device),\n"
          "  or part of a device or platform name\n",
          f);
}

const char *cli_model_help(const char *default_model)
{
    static char help[512];
    int used = snprintf(help, sizeof help, "a spec (\"linear 256, relu, linear 10\"), a file (a "
                                           "'/' or one word with a dot is always a path), or a "
                                           "preset: ");
    for (int i = 0; clt_spec_preset_get(i) && used > 0 && (size_t)used < sizeof help; i++)
        used += snprintf(help + used, sizeof help - (size_t)used, "%s%s",
                         i == 0 ? "" : clt_spec_preset_get(i + 1) ? ", " : " or ",
                         clt_spec_preset_get(i)->name);
    if (used > 0 && (size_t)used < sizeof help)
        snprintf(help + used, sizeof help - (size_t)used,
                 " (%s; cltrain help spec lists the layers)", default_model);
    return help;
}

static void print_spec_help(void)
{
    printf("model spec: layers separated by commas or newlines, '#' to the end of a line a "
           "comment,\ne.g. \"linear 256, relu, dropout 0.1, linear 10\"; words are "
           "case-insensitive\n\nlayers:\n");
    for (int k = 0; k < CLT_LAYER__COUNT; k++)
        cli_print_row(clt_layer_kind_usage((clt_layer_kind)k),
                      clt_layer_kind_help((clt_layer_kind)k));
    printf("\npresets (a whole spec; N is the number of classes, V the vocabulary):\n");
    for (int i = 0; clt_spec_preset_get(i); i++) {
        const clt_spec_preset *p = clt_spec_preset_get(i);
        cli_print_row(p->name, p->help);
        cli_print_row("", p->layers);
    }
}

/* The manual's layer list: a tagged paragraph per kind, its grammar and its line. */
static int man_layers(void)
{
    man_region_begin(stdout, "layers");
    for (int k = 0; k < CLT_LAYER__COUNT; k++) {
        const char *usage = clt_layer_kind_usage((clt_layer_kind)k);
        const char *help = clt_layer_kind_help((clt_layer_kind)k);
        if (!usage || !help)
            return cli_error("help: layer kind %s has no usage or help in the layer table",
                             clt_layer_kind_name((clt_layer_kind)k));
        fputs(".TP\n", stdout);
        man_syntax(stdout, usage);
        man_text(stdout, help);
    }
    man_region_end(stdout, "layers");
    return CLI_OK;
}

static int man_presets(void)
{
    man_region_begin(stdout, "presets");
    for (int i = 0; clt_spec_preset_get(i); i++) {
        const clt_spec_preset *p = clt_spec_preset_get(i);
        if (!p->help) return cli_error("help: preset %s has no help in its table", p->name);
        fputs(".TP\n", stdout);
        man_syntax(stdout, p->name);
        man_text(stdout, p->help);
        fputs(".br\n", stdout);
        man_syntax(stdout, p->layers);
    }
    man_region_end(stdout, "presets");
    return CLI_OK;
}

/* Every command's options, as its --help prints them, in roff. */
static int man_options(void)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } commands[] = {
        {"devices", cli_devices}, {"selfcheck", cli_selfcheck}, {"train", cli_train},
        {"eval", cli_eval},       {"predict", cli_predict},     {"generate", cli_generate},
        {"bench", cli_bench},     {"plot", cli_plot},           {"kernels", cli_kernels},
    };
    man_region_begin(stdout, "options");
    cli_set_help_roff(true);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char name[16], help[] = "--help";
        snprintf(name, sizeof name, "%s", commands[i].name);
        char *argv[] = {name, help, NULL};
        int rc = commands[i].run(2, argv);
        if (rc != CLI_OK) return rc;
    }
    cli_set_help_roff(false);
    man_region_end(stdout, "options");
    return CLI_OK;
}

int cli_help(int argc, char **argv)
{
    if (argc < 2) {
        cli_usage(stdout);
        return CLI_OK;
    }
    if (argc == 2 && strcmp(argv[1], "spec") == 0) {
        print_spec_help();
        return CLI_OK;
    }
    if (argc == 2 && strcmp(argv[1], "--man-sections") == 0) {
        int rc = man_layers();
        if (rc == CLI_OK) rc = man_presets();
        if (rc == CLI_OK) rc = man_options();
        return rc;
    }
    return cli_usage_error("help: unknown topic \"%s\"; expected spec, or no topic", argv[1]);
}
