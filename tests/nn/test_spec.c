/* Tests of the model-spec parser: every layer and preset, comments and newlines, every error
 * message (its layer, position and wording), validation against the data, the canonical text
 * and its round trip, and reading from a file. */
#include "common.h"
#include "cltrain/errors.h"
#include "cltrain/model.h" /* the layers' shapes: clt_model_param_elements, host-only */
#include "cltrain/spec.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parses text, expects failure with `status`, *out left empty, and the exact message. */
static void expect_error(const char *text, int classes, clt_status status, const char *msg)
{
    clt_spec s = {7, (clt_layer_spec *)&s};
    clt_status st = clt_spec_parse(text, classes, &s);
    ck_assert_msg(st == status, "\"%s\": status %s, expected %s", text, clt_status_name(st),
                  clt_status_name(status));
    ck_assert_int_eq(s.n, 0);
    ck_assert_ptr_null(s.layers);
    ck_assert_str_eq(clt_last_errmsg(), msg);
}

static void expect_layer(const clt_layer_spec *l, clt_layer_kind kind, int out, bool bias, float p)
{
    ck_assert_int_eq(l->kind, kind);
    ck_assert_int_eq(l->out, out);
    ck_assert_int_eq(l->bias, bias);
    ck_assert_msg(l->p == p, "p %g, expected %g", (double)l->p, (double)p);
}

START_TEST(test_parse_all_kinds)
{
    clt_spec s;
    ck_assert_int_eq(clt_spec_parse("linear 256, relu, linear 8 nobias, gelu, tanh, sigmoid, "
                                    "dropout 0.25, flatten, linear 10, silu, leakyrelu, "
                                    "LeakyReLU 0.2",
                                    0, &s),
                     CLT_OK);
    ck_assert_int_eq(s.n, 12);
    expect_layer(&s.layers[0], CLT_LAYER_LINEAR, 256, true, 0.0f);
    expect_layer(&s.layers[1], CLT_LAYER_RELU, 0, false, 0.0f);
    expect_layer(&s.layers[2], CLT_LAYER_LINEAR, 8, false, 0.0f);
    expect_layer(&s.layers[3], CLT_LAYER_GELU, 0, false, 0.0f);
    expect_layer(&s.layers[4], CLT_LAYER_TANH, 0, false, 0.0f);
    expect_layer(&s.layers[5], CLT_LAYER_SIGMOID, 0, false, 0.0f);
    expect_layer(&s.layers[6], CLT_LAYER_DROPOUT, 0, false, 0.25f);
    expect_layer(&s.layers[7], CLT_LAYER_FLATTEN, 0, false, 0.0f);
    expect_layer(&s.layers[8], CLT_LAYER_LINEAR, 10, true, 0.0f);
    expect_layer(&s.layers[9], CLT_LAYER_SILU, 0, false, 0.0f);
    expect_layer(&s.layers[10], CLT_LAYER_LEAKYRELU, 0, false, 0.0f);
    expect_layer(&s.layers[11], CLT_LAYER_LEAKYRELU, 0, false, 0.0f);
    ck_assert(s.layers[9].alpha == 0.0f);
    ck_assert(s.layers[10].alpha == 0.01f); /* nn.LeakyReLU's default slope */
    ck_assert(s.layers[11].alpha == 0.2f);
    clt_spec_free(&s);
    ck_assert_int_eq(s.n, 0);
    ck_assert_ptr_null(s.layers);
    clt_spec_free(&s); /* twice is harmless */
    clt_spec_free(NULL);
}
END_TEST

START_TEST(test_parse_comments_newlines_spaces)
{
    clt_spec s;
    const char *text = "# a small model\n"
                       "  LINEAR\t64   # hidden\r\n"
                       "\n"
                       "ReLU,\n"
                       "dropout   0.1  \n"
                       "\tlinear 10 NoBias # out, with a comma in the comment\n";
    ck_assert_int_eq(clt_spec_parse(text, 0, &s), CLT_OK);
    ck_assert_int_eq(s.n, 4);
    expect_layer(&s.layers[0], CLT_LAYER_LINEAR, 64, true, 0.0f);
    expect_layer(&s.layers[1], CLT_LAYER_RELU, 0, false, 0.0f);
    expect_layer(&s.layers[2], CLT_LAYER_DROPOUT, 0, false, 0.1f);
    expect_layer(&s.layers[3], CLT_LAYER_LINEAR, 10, false, 0.0f);
    clt_spec_free(&s);
}
END_TEST

START_TEST(test_presets)
{
    clt_spec s;
    ck_assert_int_eq(clt_spec_parse("mlp", 10, &s), CLT_OK);
    ck_assert_int_eq(s.n, 5);
    expect_layer(&s.layers[0], CLT_LAYER_LINEAR, 256, true, 0.0f);
    expect_layer(&s.layers[1], CLT_LAYER_RELU, 0, false, 0.0f);
    expect_layer(&s.layers[2], CLT_LAYER_LINEAR, 128, true, 0.0f);
    expect_layer(&s.layers[3], CLT_LAYER_RELU, 0, false, 0.0f);
    expect_layer(&s.layers[4], CLT_LAYER_LINEAR, 10, true, 0.0f);
    clt_spec_free(&s);
    ck_assert_int_eq(clt_spec_parse("CNN", 7, &s), CLT_OK);
    ck_assert_int_eq(s.n, 13);
    char *text = NULL;
    ck_assert_int_eq(clt_spec_to_string(&s, &text), CLT_OK);
    ck_assert_str_eq(text, "conv 32 k3 p1, batchnorm, relu, maxpool 2, conv 64 k3 p1, batchnorm, "
                           "relu, maxpool 2, flatten, dropout 0.25, linear 128, relu, linear 7");
    free(text);
    clt_spec_free(&s);
    ck_assert_int_eq(clt_spec_parse("  # the preset\n LogReg \n", 3, &s), CLT_OK);
    ck_assert_int_eq(s.n, 1);
    expect_layer(&s.layers[0], CLT_LAYER_LINEAR, 3, true, 0.0f);
    clt_spec_free(&s);

    expect_error("mlp", 0, CLT_ERR_INVALID_ARG,
                 "model spec: layer 1 (\"mlp\") at column 1: preset \"mlp\" needs the number of "
                 "classes, in [1, 16777216], got 0");
    expect_error("logreg 5", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"logreg 5\") at column 8: preset \"logreg\" takes no "
                 "arguments, got \"5\"");
    expect_error("mlp, dropout 0.1", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"mlp\") at column 1: preset \"mlp\" must be the whole "
                 "spec, not one of its layers");
    expect_error("linear 5, relu, logreg", 10, CLT_ERR_FORMAT,
                 "model spec: layer 3 (\"logreg\") at column 17: preset \"logreg\" must be the "
                 "whole spec, not one of its layers");
}
END_TEST

/* The preset table: the six presets in order, each with a line of help, each name parsing to
 * its text (a spec of its own) with N the number of classes (one word, 12345 classes), the
 * language models' with their head's V and their window; NULL outside the table. */
START_TEST(test_preset_table)
{
    static const char *const names[] = {"mlp", "logreg", "cnn", "resnet", "gpt-mini", "gpt-char"};
    static const int blocks[] = {0, 0, 0, 0, 64, 256};
    int n = 0;
    for (; clt_spec_preset_get(n); n++) {
        const clt_spec_preset *p = clt_spec_preset_get(n);
        ck_assert_int_lt(n, 6);
        ck_assert_str_eq(p->name, names[n]);
        ck_assert_int_eq(p->block, blocks[n]);
        ck_assert_ptr_nonnull(p->help);
        ck_assert_int_gt(strlen(p->help), 10);
        ck_assert_ptr_null(strchr(p->help, '\n'));
        /* the layers, N read as 12345 by hand: the last word (a language model's: V) */
        const char *tail = strrchr(p->layers, ' ');
        ck_assert_ptr_nonnull(tail);
        char want[2048];
        if (p->block) {
            ck_assert_str_eq(tail, " tied");
            snprintf(want, sizeof want, "%s", p->layers);
        } else {
            ck_assert_str_eq(tail, " N");
            snprintf(want, sizeof want, "%.*s 12345", (int)(tail - p->layers), p->layers);
        }
        clt_spec s, t;
        char *a = NULL, *b = NULL;
        ck_assert_int_eq(clt_spec_parse(p->name, 12345, &s), CLT_OK);
        ck_assert_int_eq(clt_spec_parse(want, 12345, &t), CLT_OK);
        ck_assert_int_eq(clt_spec_to_string(&s, &a), CLT_OK);
        ck_assert_int_eq(clt_spec_to_string(&t, &b), CLT_OK);
        ck_assert_str_eq(a, b);
        ck_assert_int_eq(clt_spec_takes_tokens(&s), p->block > 0);
        free(a);
        free(b);
        clt_spec_free(&s);
        clt_spec_free(&t);
    }
    ck_assert_int_eq(n, 6);
    ck_assert_ptr_null(clt_spec_preset_get(-1));
    ck_assert_ptr_null(clt_spec_preset_get(6));
}
END_TEST

/* The GPT presets' specs are tools/torch_gpt.py's text (gpt_spec), and each builds on a
 * 65-character vocabulary at its window: nanoGPT's parameter count (its blocks: layer norms,
 * the attention's 3D x D and D x D projections with biases, the 4D-wide MLP; the head tied). */
START_TEST(test_gpt_presets)
{
    static const struct {
        const char *name;
        int layers, heads, dim, block;
        const char *drop;
    } gpt[] = {{"gpt-mini", 4, 4, 128, 64, ""}, {"gpt-char", 6, 6, 384, 256, ", dropout 0.2"}};
    for (int g = 0; g < 2; g++) {
        char want[2048];
        int used = snprintf(want, sizeof want, "embed %d, posembed%s", gpt[g].dim, gpt[g].drop);
        for (int l = 0; l < gpt[g].layers; l++)
            used += snprintf(want + used, sizeof want - (size_t)used,
                             ", residual { layernorm, attention %d causal%s }, residual { "
                             "layernorm, linear %d, gelu, linear %d%s }",
                             gpt[g].heads, gpt[g].drop, 4 * gpt[g].dim, gpt[g].dim, gpt[g].drop);
        snprintf(want + used, sizeof want - (size_t)used, ", layernorm, linear V nobias tied");
        clt_spec s;
        char *text = NULL;
        ck_assert_int_eq(clt_spec_parse(gpt[g].name, 65, &s), CLT_OK);
        ck_assert_int_eq(clt_spec_to_string(&s, &text), CLT_OK);
        ck_assert_str_eq(text, want);
        free(text);
        ck_assert_int_eq(clt_spec_validate(&s, gpt[g].block, 65), CLT_OK);
        uint64_t P = 0, D = (uint64_t)gpt[g].dim;
        uint64_t block = 2 * D + (3 * D * D + 3 * D) + (D * D + D) + 2 * D + (4 * D * D + 4 * D) +
                         (4 * D * D + D);
        ck_assert_int_eq(clt_model_param_elements(&s, (size_t)gpt[g].block, 65, NULL, &P), CLT_OK);
        ck_assert_uint_eq(P, 65 * D + (uint64_t)gpt[g].block * D + gpt[g].layers * block + 2 * D);
        clt_spec_free(&s);
    }
}
END_TEST

START_TEST(test_errors_layers)
{
    expect_error("linear 256, relu, linaer 128", 10, CLT_ERR_FORMAT,
                 "model spec: layer 3 (\"linaer 128\") at column 19: unknown layer \"linaer\"; "
                 "expected linear, relu, gelu, tanh, sigmoid, dropout, flatten, silu, "
                 "leakyrelu, conv, maxpool, avgpool, globalavgpool, batchnorm, residual, layernorm, embed, "
                 "posembed or attention");
    expect_error("relu, linear", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"linear\") at column 13: linear needs a width, e.g. "
                 "\"linear 128\"");
    expect_error("linear 0", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"linear 0\") at column 8: width must be a positive "
                 "integer, got \"0\"");
    expect_error("linear -3", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"linear -3\") at column 8: width must be a positive "
                 "integer, got \"-3\"");
    expect_error("linear 12.5", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"linear 12.5\") at column 8: width must be a positive "
                 "integer, got \"12.5\"");
    expect_error("linear 99999999999999999999", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"linear 99999999999999999999\") at column 8: width must "
                 "be at most 16777216, got \"99999999999999999999\"");
    expect_error("linear 10 bias", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"linear 10 bias\") at column 11: unexpected \"bias\" after "
                 "the width; expected \"nobias\" or the end of the layer");
    expect_error("linear 10 nobias relu", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"linear 10 nobias relu\") at column 18: unexpected "
                 "\"relu\" after \"nobias\"; expected \"tied\" or the end of the layer");
    expect_error("linear V tied", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"linear V tied\") at column 10: a tied head has no bias: "
                 "write \"linear V nobias tied\"");
    expect_error("linear 4 nobias tied relu", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"linear 4 nobias tied relu\") at column 22: unexpected "
                 "\"relu\" after \"tied\"; expected the end of the layer");
    expect_error("embed", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"embed\") at column 6: embed needs a width, e.g. "
                 "\"embed 128\"");
    expect_error("embed V", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"embed V\") at column 7: width must be a positive "
                 "integer, got \"V\"");
    expect_error("embed 4 2", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"embed 4 2\") at column 9: unexpected \"2\" after the "
                 "width; expected the end of the layer");
    expect_error("posembed 3", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"posembed 3\") at column 10: posembed takes no "
                 "arguments, got \"3\"");
    expect_error("linear 10, relu 3", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"relu 3\") at column 17: relu takes no arguments, got "
                 "\"3\"");
    expect_error("flatten x y z w", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"flatten x y z w\") at column 9: flatten takes no "
                 "arguments, got \"x\"");
    expect_error("silu 1", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"silu 1\") at column 6: silu takes no arguments, got "
                 "\"1\"");
    expect_error("leakyrelu steep", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"leakyrelu steep\") at column 11: leakyrelu slope must "
                 "be a number, got \"steep\"");
    expect_error("leakyrelu 1e39", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"leakyrelu 1e39\") at column 11: leakyrelu slope must "
                 "be finite, got \"1e39\"");
    expect_error("leakyrelu nan", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"leakyrelu nan\") at column 11: leakyrelu slope must "
                 "be finite, got \"nan\"");
    expect_error("leakyrelu 0.1 0.2", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"leakyrelu 0.1 0.2\") at column 15: unexpected \"0.2\" "
                 "after the slope; expected the end of the layer");
}
END_TEST

START_TEST(test_errors_dropout)
{
    expect_error("dropout 1.5", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"dropout 1.5\") at column 9: dropout probability must be "
                 "in [0, 1), got 1.5");
    expect_error("dropout 1", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"dropout 1\") at column 9: dropout probability must be "
                 "in [0, 1), got 1");
    expect_error("dropout -0.1", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"dropout -0.1\") at column 9: dropout probability must "
                 "be in [0, 1), got -0.1");
    /* Rounds to 1.0f, so out of range even though the decimal is below 1. */
    expect_error("dropout 0.9999999999", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"dropout 0.9999999999\") at column 9: dropout "
                 "probability must be in [0, 1), got 0.9999999999");
    expect_error("dropout nan", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"dropout nan\") at column 9: dropout probability must be "
                 "in [0, 1), got nan");
    expect_error("dropout half", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"dropout half\") at column 9: dropout probability must "
                 "be a number in [0, 1), got \"half\"");
    expect_error("dropout 0.1x", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"dropout 0.1x\") at column 9: dropout probability must "
                 "be a number in [0, 1), got \"0.1x\"");
    expect_error("linear 5, dropout", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"dropout\") at column 18: dropout needs a probability, "
                 "e.g. \"dropout 0.1\"");
    expect_error("dropout 0.5 0.5", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"dropout 0.5 0.5\") at column 13: unexpected \"0.5\" "
                 "after the probability; expected the end of the layer");
}
END_TEST

START_TEST(test_errors_positions_and_empty)
{
    /* Several lines: line and column; comments and blank lines still count as lines. */
    expect_error("linear 10\n# comment\n\nrelu\n   tanhh, linear 3\n", 10, CLT_ERR_FORMAT,
                 "model spec: layer 3 (\"tanhh\") at line 5, column 4: unknown layer \"tanhh\"; "
                 "expected linear, relu, gelu, tanh, sigmoid, dropout, flatten, silu, "
                 "leakyrelu, conv, maxpool, avgpool, globalavgpool, batchnorm, residual, layernorm, embed, "
                 "posembed or attention");
    expect_error("relu, linear 3, gelu , linear 0x10 # hex\n", 10, CLT_ERR_FORMAT,
                 "model spec: layer 4 (\"linear 0x10\") at column 31: width must be a positive "
                 "integer, got \"0x10\"");
    expect_error("", 10, CLT_ERR_FORMAT,
                 "model spec: no layers; expected e.g. \"linear 128, relu, linear 10\" or a "
                 "preset (mlp, logreg, cnn, resnet, gpt-mini, gpt-char)");
    expect_error(" \n # nothing here\n\t", 10, CLT_ERR_FORMAT,
                 "model spec: no layers; expected e.g. \"linear 128, relu, linear 10\" or a "
                 "preset (mlp, logreg, cnn, resnet, gpt-mini, gpt-char)");
    /* An empty entry before a comma is an error (it used to be skipped: "a,,b" was "a,b"); a
     * trailing comma and blank lines are not. */
    expect_error("linear 64,,relu, linear 10", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"\") at column 11: empty layer: nothing before this "
                 "comma (\"a,,b\" or a leading comma); remove the extra comma");
    expect_error(" , linear 10", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"\") at column 2: empty layer: nothing before this "
                 "comma (\"a,,b\" or a leading comma); remove the extra comma");
    expect_error("linear 64\nrelu,\n  ,\nlinear 10\n", 10, CLT_ERR_FORMAT,
                 "model spec: layer 3 (\"\") at line 3, column 3: empty layer: nothing before "
                 "this comma (\"a,,b\" or a leading comma); remove the extra comma");
    /* Long entries are cut in the quote. */
    char text[200];
    snprintf(text, sizeof text, "%s", "linear 10, dense ");
    for (int i = 0; i < 100; i++)
        strcat(text, "x");
    clt_spec s;
    ck_assert_int_eq(clt_spec_parse(text, 10, &s), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "layer 2 (\"dense xxxxxxx"));
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "xxx...\") at column 12: unknown layer"));
}
END_TEST

/* At most CLT_SPEC_MAX_LAYERS layers: 10,000 layers used to be parsed and built (4.8 GB). */
START_TEST(test_errors_too_many_layers)
{
    size_t cap = 16 * (CLT_SPEC_MAX_LAYERS + 2);
    char *text = malloc(cap);
    clt_spec s;
    ck_assert_ptr_nonnull(text);
    text[0] = '\0';
    for (int i = 0; i < CLT_SPEC_MAX_LAYERS - 1; i++)
        strcat(text, "linear 8, ");
    strcat(text, "linear 10");
    ck_assert_int_eq(clt_spec_parse(text, 10, &s), CLT_OK);
    ck_assert_int_eq(s.n, CLT_SPEC_MAX_LAYERS);
    clt_spec_free(&s);
    strcat(text, ", relu");
    expect_error(text, 10, CLT_ERR_FORMAT,
                 "model spec: more than 1024 layers; a model spec this deep is almost certainly "
                 "a mistake");
    free(text);
}
END_TEST

/* An activation after the last linear layer squashes the logits: clt_spec_check_output says
 * so (the cltrain program calls it before training); dropout or flatten there is allowed. */
START_TEST(test_check_output)
{
    clt_spec s;
    ck_assert_int_eq(clt_spec_parse("linear 32, relu, linear 10, relu", 0, &s), CLT_OK);
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_OK); /* a valid model... */
    ck_assert_int_eq(clt_spec_check_output(&s), CLT_ERR_INVALID_ARG); /* ...but not to train */
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 4 (relu) comes after the last linear layer; the loss "
                     "reads that layer's outputs as they are (logits for classification, where "
                     "softmax is part of the loss; the predictions for regression), and an "
                     "activation there clips or squashes them. Remove it, or put a linear layer "
                     "after it");
    clt_spec_free(&s);
    const char *bad[] = {"linear 10, sigmoid", "linear 10, gelu, dropout 0.1", "linear 10, tanh",
                         "linear 10, silu", "linear 10, flatten, leakyrelu 0.1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_int_eq(clt_spec_parse(bad[i], 0, &s), CLT_OK);
        ck_assert_msg(clt_spec_check_output(&s) == CLT_ERR_INVALID_ARG, "%s", bad[i]);
        clt_spec_free(&s);
    }
    const char *good[] = {"linear 10", "linear 32, relu, linear 10, dropout 0.2",
                          "flatten, linear 16, tanh, linear 10, flatten",
                          "silu, linear 16, leakyrelu, linear 10"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        ck_assert_int_eq(clt_spec_parse(good[i], 0, &s), CLT_OK);
        ck_assert_msg(clt_spec_check_output(&s) == CLT_OK, "%s: %s", good[i], clt_last_errmsg());
        clt_spec_free(&s);
    }
}
END_TEST

START_TEST(test_validate)
{
    clt_spec s;
    ck_assert_int_eq(clt_spec_parse("linear 32, relu, linear 10, sigmoid", 0, &s), CLT_OK);
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_OK);
    ck_assert_int_eq(clt_spec_validate(&s, 784, 12), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: the last linear layer has 10 outputs but the data has 12 "
                     "classes");
    ck_assert_int_eq(clt_spec_validate(&s, 0, 10), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: the data has 0 input features; expected at least 1");
    ck_assert_int_eq(clt_spec_validate(&s, 5, 0), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(), "model spec: the data has 0 classes; expected at least 1");
    /* Fields out of range in a spec made by hand. */
    s.layers[0].out = 0;
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 1: linear width must be in [1, 16777216], got 0");
    s.layers[0].out = 32;
    s.layers[1].kind = CLT_LAYER_DROPOUT;
    s.layers[1].p = 1.0f;
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 2: dropout probability must be in [0, 1), got 1");
    s.layers[1].kind = CLT_LAYER_LEAKYRELU;
    s.layers[1].p = 0.0f;
    s.layers[1].alpha = (float)INFINITY;
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 2: leakyrelu slope must be finite, got inf");
    s.layers[1].kind = (clt_layer_kind)99;
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(), "model spec: layer 2 has unknown kind 99");
    clt_spec_free(&s);

    ck_assert_int_eq(clt_spec_parse("flatten, relu, dropout 0.2", 0, &s), CLT_OK);
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: the model has no linear layer; it needs at least one, e.g. "
                     "\"linear 10\"");
    clt_spec_free(&s);
    clt_spec empty = {0, NULL};
    ck_assert_int_eq(clt_spec_validate(&empty, 784, 10), CLT_ERR_INVALID_ARG);
}
END_TEST

static void expect_same(const clt_spec *a, const clt_spec *b)
{
    ck_assert_int_eq(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        expect_layer(&b->layers[i], a->layers[i].kind, a->layers[i].out, a->layers[i].bias,
                     a->layers[i].p);
        ck_assert_msg(b->layers[i].alpha == a->layers[i].alpha, "alpha %g, expected %g",
                      (double)b->layers[i].alpha, (double)a->layers[i].alpha);
        ck_assert_int_eq(b->layers[i].k, a->layers[i].k);
        ck_assert_int_eq(b->layers[i].stride, a->layers[i].stride);
        ck_assert_int_eq(b->layers[i].pad, a->layers[i].pad);
    }
}

START_TEST(test_to_string_round_trip)
{
    static const struct {
        const char *text, *canonical;
    } cases[] = {
        {"linear 256, relu, linear 10", "linear 256, relu, linear 10"},
        {"mlp", "linear 256, relu, linear 128, relu, linear 10"},
        {"# c\nLinear 5 NOBIAS\n gelu\ntanh,sigmoid, flatten ,dropout 0.10",
         "linear 5 nobias, gelu, tanh, sigmoid, flatten, dropout 0.1"},
        {"dropout 0.3333333333333", "dropout 0.33333334"},
        {"dropout 1e-5, dropout 0, dropout -0, dropout 0.5, dropout 0.99999",
         "dropout 1e-05, dropout 0, dropout 0, dropout 0.5, dropout 0.99999"},
        {"linear 16777216", "linear 16777216"},
        {"SiLU, leakyrelu, leakyrelu 0.2, leakyrelu -1e-3, leakyrelu 1E1, leakyrelu -0",
         "silu, leakyrelu 0.01, leakyrelu 0.2, leakyrelu -0.001, leakyrelu 10, leakyrelu 0"},
        {"leakyrelu 0.3333333333333", "leakyrelu 0.33333334"},
        {"CONV 32 K3 P1, conv 8 k5 s2, conv 4 k1 s1 p0 nobias, "
         "conv 16777216 k255 s255 p255 nobias",
         "conv 32 k3 p1, conv 8 k5 s2, conv 4 k1 nobias, conv 16777216 k255 s255 p255 nobias"},
        {"MaxPool 2, maxpool 3 S2, avgpool 2 s1, avgpool 4 s4, GlobalAvgPool, maxpool 255 s255",
         "maxpool 2, maxpool 3 s2, avgpool 2 s1, avgpool 4, globalavgpool, maxpool 255"},
        {"conv 4 k3, BatchNorm, relu,batchnorm ,flatten, linear 3, batchnorm",
         "conv 4 k3, batchnorm, relu, batchnorm, flatten, linear 3, batchnorm"},
        {"linear 8, LayerNorm, relu,layernorm , linear 3, layernorm",
         "linear 8, layernorm, relu, layernorm, linear 3, layernorm"},
        {"Embed 32, POSEMBED, linear v, linear V nobias, linear V NOBIAS Tied",
         "embed 32, posembed, linear V, linear V nobias, linear V nobias tied"},
        {"embed 16777216, linear 7 nobias tied", "embed 16777216, linear 7 nobias tied"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clt_spec a, b;
        char *text = NULL, *again = NULL;
        ck_assert_int_eq(clt_spec_parse(cases[i].text, 10, &a), CLT_OK);
        ck_assert_int_eq(clt_spec_to_string(&a, &text), CLT_OK);
        ck_assert_str_eq(text, cases[i].canonical);
        ck_assert_int_eq(clt_spec_parse(text, 0, &b), CLT_OK);
        expect_same(&a, &b);
        ck_assert_int_eq(clt_spec_to_string(&b, &again), CLT_OK);
        ck_assert_str_eq(again, text);
        free(text);
        free(again);
        clt_spec_free(&a);
        clt_spec_free(&b);
    }
    /* Every float probability in a sweep reads back exactly. */
    for (int k = 0; k < 2000; k++) {
        clt_layer_spec l = {.kind = CLT_LAYER_DROPOUT, .p = (float)k / 2001.0f};
        clt_spec a = {1, &l}, b;
        char *text = NULL;
        ck_assert_int_eq(clt_spec_to_string(&a, &text), CLT_OK);
        ck_assert_int_eq(clt_spec_parse(text, 0, &b), CLT_OK);
        expect_same(&a, &b);
        free(text);
        clt_spec_free(&b);
    }
    /* And every float slope, of either sign and any size. */
    for (int k = -1000; k < 1000; k++) {
        clt_layer_spec l = {.kind = CLT_LAYER_LEAKYRELU, .alpha = (float)k * 1.37e-3f * (float)k};
        if (k < 0) l.alpha = -l.alpha;
        clt_spec a = {1, &l}, b;
        char *text = NULL;
        ck_assert_int_eq(clt_spec_to_string(&a, &text), CLT_OK);
        ck_assert_int_eq(clt_spec_parse(text, 0, &b), CLT_OK);
        expect_same(&a, &b);
        free(text);
        clt_spec_free(&b);
    }
    clt_spec empty = {0, NULL};
    char *text = NULL;
    ck_assert_int_eq(clt_spec_to_string(&empty, &text), CLT_OK);
    ck_assert_str_eq(text, "");
    free(text);
    clt_layer_spec bad = {.kind = (clt_layer_kind)42};
    clt_spec b = {1, &bad};
    text = (char *)"untouched";
    ck_assert_int_eq(clt_spec_to_string(&b, &text), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_null(text);
}
END_TEST

/* Writes `len` bytes to a fresh temporary file; the caller unlinks it. */
static void write_temp(char *path, size_t size, const char *data, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/cltrain_spec_XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
}

START_TEST(test_parse_file)
{
    char path[4096], expected[4400];
    const char text[] = "# hidden layers\nlinear 128\nrelu\n\n# head\nlinear 10\n";
    clt_spec s;
    write_temp(path, sizeof path, text, strlen(text));
    ck_assert_int_eq(clt_spec_parse_file(path, 0, &s), CLT_OK);
    ck_assert_int_eq(s.n, 3);
    expect_layer(&s.layers[2], CLT_LAYER_LINEAR, 10, true, 0.0f);
    clt_spec_free(&s);
    unlink(path);

    /* A one-line file still reports the line. */
    const char bad[] = "linear 10, dropout 2";
    write_temp(path, sizeof path, bad, strlen(bad));
    ck_assert_int_eq(clt_spec_parse_file(path, 0, &s), CLT_ERR_FORMAT);
    ck_assert_ptr_null(s.layers);
    snprintf(expected, sizeof expected,
             "model spec file \"%s\": layer 2 (\"dropout 2\") at line 1, column 20: dropout "
             "probability must be in [0, 1), got 2",
             path);
    ck_assert_str_eq(clt_last_errmsg(), expected);
    unlink(path);

    const char nul[] = "linear 10\0relu";
    write_temp(path, sizeof path, nul, sizeof nul - 1);
    ck_assert_int_eq(clt_spec_parse_file(path, 0, &s), CLT_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "holds a NUL byte"));
    unlink(path);

    write_temp(path, sizeof path, "\n", 1);
    ck_assert_int_eq(clt_spec_parse_file(path, 0, &s), CLT_ERR_FORMAT);
    snprintf(expected, sizeof expected, "model spec file \"%s\": no layers;", path);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), expected));
    unlink(path);

    ck_assert_int_eq(clt_spec_parse_file("/nonexistent/cltrain/model.txt", 0, &s), CLT_ERR_IO);
    ck_assert_str_eq(clt_last_errmsg(), "model spec file \"/nonexistent/cltrain/model.txt\": "
                                        "cannot open: No such file or directory");
    ck_assert_int_eq(s.n, 0);
}
END_TEST

/* conv: its words, defaults, errors (each with its position), the range checks of a spec made by
 * hand and the rule that the last layer with weights is linear. */
START_TEST(test_conv)
{
    clt_spec s;
    ck_assert_int_eq(clt_spec_parse("conv 32 k3, Conv 8 K5 S2 P2 NoBias, conv 1 k1 p0", 0, &s),
                     CLT_OK);
    ck_assert_int_eq(s.n, 3);
    expect_layer(&s.layers[0], CLT_LAYER_CONV, 32, true, 0.0f);
    ck_assert_int_eq(s.layers[0].k, 3);
    ck_assert_int_eq(s.layers[0].stride, 1);
    ck_assert_int_eq(s.layers[0].pad, 0);
    expect_layer(&s.layers[1], CLT_LAYER_CONV, 8, false, 0.0f);
    ck_assert_int_eq(s.layers[1].k, 5);
    ck_assert_int_eq(s.layers[1].stride, 2);
    ck_assert_int_eq(s.layers[1].pad, 2);
    expect_layer(&s.layers[2], CLT_LAYER_CONV, 1, true, 0.0f);
    ck_assert_int_eq(s.layers[2].k, 1);
    ck_assert_int_eq(s.layers[2].pad, 0);
    /* the last layer with weights must be linear */
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: the last layer with weights is layer 3 (conv); a model ends "
                     "with a linear layer of 10 outputs, e.g. \"flatten, linear 10\" after it");
    /* fields out of range in a spec made by hand */
    s.layers[2].kind = CLT_LAYER_LINEAR;
    s.layers[2].out = 10;
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_OK);
    s.layers[1].stride = 0;
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(), "model spec: layer 2: conv kernel size and stride must be "
                                        "in [1, 255] and padding in [0, 255], got k5 s0 p2");
    s.layers[1].stride = 1;
    s.layers[1].out = 0;
    ck_assert_int_eq(clt_spec_validate(&s, 784, 10), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 2: conv channel count must be in [1, 16777216], got 0");
    clt_spec_free(&s);

    expect_error("relu, conv", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"conv\") at column 11: conv needs a channel count and a "
                 "kernel size, e.g. \"conv 32 k3\"");
    expect_error("conv 32", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 32\") at column 8: conv needs a kernel size after "
                 "the channel count, e.g. \"conv 32 k3\"");
    expect_error("conv k3", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv k3\") at column 6: channel count must be a positive "
                 "integer, got \"k3\"");
    expect_error("conv 0 k3", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 0 k3\") at column 6: channel count must be a "
                 "positive integer, got \"0\"");
    expect_error("conv 32 3", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 32 3\") at column 9: expected the kernel size "
                 "\"k<K>\" (e.g. \"k3\") after the channel count, got \"3\"");
    expect_error("conv 32 k0", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 32 k0\") at column 9: kernel size must be in [1, "
                 "255], got \"k0\"");
    expect_error("conv 32 k256", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 32 k256\") at column 9: kernel size must be in [1, "
                 "255], got \"k256\"");
    expect_error("conv 32 k3 s0", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 32 k3 s0\") at column 12: stride must be in [1, "
                 "255], got \"s0\"");
    expect_error("conv 32 k3 p999", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 32 k3 p999\") at column 12: padding must be in [0, "
                 "255], got \"p999\"");
    expect_error("conv 32 k3 p1 s2", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 32 k3 p1 s2\") at column 15: unexpected \"s2\"; "
                 "expected \"nobias\" or the end of the layer (in that order)");
    expect_error("conv 32 k3 sx", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 32 k3 sx\") at column 12: unexpected \"sx\"; "
                 "expected \"s<S>\", \"p<P>\", \"nobias\" or the end of the layer (in that "
                 "order)");
    expect_error("conv 32 k3 s2 p1 nobias p1", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"conv 32 k3 s2 p1 nobias p1\") at column 25: unexpected "
                 "\"p1\"; expected the end of the layer (in that order)");
}
END_TEST

/* maxpool, avgpool and globalavgpool: their words, the stride's default (K), every error with
 * its position, and the range checks of a spec made by hand. */
START_TEST(test_pool)
{
    clt_spec s;
    ck_assert_int_eq(clt_spec_parse("maxpool 2, MaxPool 3 S2, avgpool 2 s1, avgpool 4 s4, "
                                    "globalavgpool, linear 3",
                                    0, &s),
                     CLT_OK);
    ck_assert_int_eq(s.n, 6);
    const int k[] = {2, 3, 2, 4, 0}, stride[] = {2, 2, 1, 4, 0};
    const clt_layer_kind kinds[] = {CLT_LAYER_MAXPOOL, CLT_LAYER_MAXPOOL, CLT_LAYER_AVGPOOL,
                                    CLT_LAYER_AVGPOOL, CLT_LAYER_GLOBALAVGPOOL};
    for (int i = 0; i < 5; i++) {
        expect_layer(&s.layers[i], kinds[i], 0, false, 0.0f);
        ck_assert_int_eq(s.layers[i].k, k[i]);
        ck_assert_int_eq(s.layers[i].stride, stride[i]);
        ck_assert_int_eq(s.layers[i].pad, 0);
    }
    ck_assert_int_eq(clt_spec_validate(&s, 784, 3), CLT_OK);
    ck_assert_int_eq(clt_spec_check_output(&s), CLT_OK);
    /* fields out of range in a spec made by hand */
    s.layers[0].k = 0;
    ck_assert_int_eq(clt_spec_validate(&s, 784, 3), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 1: maxpool window size must be in [1, 255], got 0");
    s.layers[0].k = 2;
    s.layers[2].stride = 256;
    ck_assert_int_eq(clt_spec_validate(&s, 784, 3), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 3: avgpool stride must be in [1, 255], got 256");
    clt_spec_free(&s);

    expect_error("relu, maxpool", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"maxpool\") at column 14: maxpool needs a window size, "
                 "e.g. \"maxpool 2\"");
    expect_error("maxpool 0", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"maxpool 0\") at column 9: maxpool window size must be an "
                 "integer in [1, 255], got \"0\"");
    expect_error("avgpool 256", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"avgpool 256\") at column 9: avgpool window size must be "
                 "an integer in [1, 255], got \"256\"");
    expect_error("maxpool k2", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"maxpool k2\") at column 9: maxpool window size must be "
                 "an integer in [1, 255], got \"k2\"");
    expect_error("maxpool 2 s0", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"maxpool 2 s0\") at column 11: maxpool stride must be "
                 "\"s\" and an integer in [1, 255], got \"s0\"");
    expect_error("avgpool 2 s", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"avgpool 2 s\") at column 11: avgpool stride must be "
                 "\"s\" and an integer in [1, 255], got \"s\"");
    expect_error("maxpool 2 3", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"maxpool 2 3\") at column 11: unexpected \"3\" after "
                 "the window size; expected a stride (\"s2\") or the end of the layer");
    expect_error("avgpool 2 s1 x", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"avgpool 2 s1 x\") at column 14: unexpected \"x\" after "
                 "the stride; expected the end of the layer");
    expect_error("conv 4 k3, batchnorm 4, linear 3", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"batchnorm 4\") at column 22: batchnorm takes no "
                 "arguments, got \"4\"");
    expect_error("linear 8, layernorm 1e-5, linear 3", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"layernorm 1e-5\") at column 21: layernorm takes no "
                 "arguments, got \"1e-5\"");
    expect_error("globalavgpool 2", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"globalavgpool 2\") at column 15: globalavgpool takes no "
                 "arguments, got \"2\"");
}
END_TEST

/* A spec whose counts pass 2^48 elements is refused naming the layer, never planned with counts
 * that wrapped: three convs of 2^24 channels with 255x255 kernels have 2 x 1.83e19 weights,
 * which wrapped the 64-bit parameter total to a small number (the fuzz_spec input
 * param-count-wraps). The memory estimate of a large but countable model saturates. */
START_TEST(test_too_large)
{
    clt_spec s;
    struct clt_model_params p = clt_model_default_params();
    uint64_t P = 0, by[CLT_MEM__COUNT] = {0};
    p.input_shape[0] = p.input_shape[1] = p.input_shape[2] = 1;
    ck_assert_int_eq(clt_spec_parse("conv 16777216 k255 p255, conv 16777216 k255 p255, "
                                    "conv 16777216 k255 p255, flatten, linear 10",
                                    10, &s),
                     CLT_OK);
    ck_assert_int_eq(clt_model_param_elements(&s, 1, 10, &p, &P), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 2 (conv 16777216 k255 p255): a parameter tensor would "
                     "have more than 2^48 elements; no device holds such a model");
    ck_assert_int_eq(clt_model_mem_estimate(&s, 1, 10, &p, by), CLT_ERR_INVALID_ARG);
    clt_spec_free(&s);
    /* one wide layer: 2^24 x 2^24 weights pass the cap */
    ck_assert_int_eq(clt_spec_parse("linear 16777216, linear 16777216, linear 10", 10, &s),
                     CLT_OK);
    ck_assert_int_eq(clt_model_param_elements(&s, 1, 10, NULL, &P), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "layer 2 (linear 16777216)"));
    clt_spec_free(&s);
    /* 2^47 parameters plan; with a batch of 2^40 the estimate saturates instead of wrapping */
    ck_assert_int_eq(clt_spec_parse("linear 8388608, linear 10", 10, &s), CLT_OK);
    ck_assert_int_eq(clt_model_param_elements(&s, 16777216, 10, NULL, &P), CLT_OK);
    ck_assert_uint_eq(P, (uint64_t)16777216 * 8388608 + 8388608 + 8388608 * 10 + 10);
    struct clt_model_params big = clt_model_default_params();
    big.max_batch = (size_t)1 << 40;
    ck_assert_int_eq(clt_model_mem_estimate(&s, 16777216, 10, &big, by), CLT_OK);
    ck_assert_uint_eq(by[CLT_MEM_ACTIVATIONS], UINT64_MAX);
    ck_assert_uint_ge(by[CLT_MEM_PARAMS], P * 4);
    clt_spec_free(&s);
}
END_TEST

START_TEST(test_kind_names)
{
    static const char *const names[] = {"linear",  "relu",      "gelu",    "tanh",
                                        "sigmoid", "dropout",   "flatten", "silu",
                                        "leakyrelu", "conv",    "maxpool", "avgpool",
                                        "globalavgpool", "batchnorm", "residual",
                                        "layernorm", "embed", "posembed", "attention"};
    ck_assert_int_eq(sizeof names / sizeof *names, CLT_LAYER__COUNT);
    for (int k = 0; k < CLT_LAYER__COUNT; k++) {
        ck_assert_str_eq(clt_layer_kind_name((clt_layer_kind)k), names[k]);
        /* its grammar starts with its name; its help is one line */
        const char *usage = clt_layer_kind_usage((clt_layer_kind)k);
        const char *help = clt_layer_kind_help((clt_layer_kind)k);
        ck_assert_ptr_nonnull(usage);
        ck_assert_int_eq(strncmp(usage, names[k], strlen(names[k])), 0);
        ck_assert(usage[strlen(names[k])] == '\0' || usage[strlen(names[k])] == ' ');
        ck_assert_ptr_nonnull(help);
        ck_assert_int_gt(strlen(help), 10);
        ck_assert_ptr_null(strchr(help, '\n'));
        clt_spec s;
        char text[32];
        snprintf(text, sizeof text, "%s%s", names[k],
                 k == CLT_LAYER_LINEAR || k == CLT_LAYER_EMBED ? " 4"
                 : k == CLT_LAYER_DROPOUT ? " 0.5"
                 : k == CLT_LAYER_CONV    ? " 4 k3"
                 : k == CLT_LAYER_MAXPOOL || k == CLT_LAYER_AVGPOOL ? " 2"
                 : k == CLT_LAYER_RESIDUAL ? " { relu }"
                 : k == CLT_LAYER_ATTENTION ? " 2 causal"
                                          : "");
        ck_assert_int_eq(clt_spec_parse(text, 0, &s), CLT_OK);
        ck_assert_int_eq(s.layers[0].kind, k);
        clt_spec_free(&s);
    }
    ck_assert_str_eq(clt_layer_kind_name(CLT_LAYER__COUNT), "unknown");
    ck_assert_str_eq(clt_layer_kind_name((clt_layer_kind)-1), "unknown");
    ck_assert_ptr_null(clt_layer_kind_usage(CLT_LAYER__COUNT));
    ck_assert_ptr_null(clt_layer_kind_help((clt_layer_kind)-1));
}
END_TEST

/* residual { LAYERS }: the body, its canonical text and round trip, braces over lines, the
 * errors (with their positions), validation of hand-built blocks and the resnet preset. */
/* layernorm: no arguments, a layer of the model's outputs allowed after the last linear layer,
 * (F) and (T, C) inputs with weight and bias of the last dimension, and a (C, H, W) input
 * refused with the reason and the fix (the plan needs no device). */
START_TEST(test_layernorm)
{
    clt_spec s;
    ck_assert_int_eq(clt_spec_parse("linear 64, layernorm, relu, linear 10, layernorm", 10, &s),
                     CLT_OK);
    ck_assert_int_eq(s.n, 5);
    ck_assert_int_eq(s.layers[1].kind, CLT_LAYER_LAYERNORM);
    ck_assert_int_eq(s.layers[4].kind, CLT_LAYER_LAYERNORM);
    ck_assert_int_eq(clt_spec_validate(&s, 20, 10), CLT_OK);
    ck_assert_int_eq(clt_spec_check_output(&s), CLT_OK);
    uint64_t P = 0;
    ck_assert_int_eq(clt_model_param_elements(&s, 20, 10, NULL, &P), CLT_OK);
    ck_assert_uint_eq(P, 20 * 64 + 64 + 2 * 64 + 64 * 10 + 10 + 2 * 10);
    clt_spec_free(&s);

    struct clt_model_params p = clt_model_default_params();
    ck_assert_int_eq(clt_spec_parse("layernorm, linear 3", 0, &s), CLT_OK);
    p.input_shape[0] = 5; /* (T, C) = (5, 4): normalised over C */
    p.input_shape[1] = 4;
    ck_assert_int_eq(clt_model_param_elements(&s, 20, 3, &p, &P), CLT_OK);
    ck_assert_uint_eq(P, 2 * 4 + 4 * 3 + 3); /* the linear layer acts on each position */
    p.input_shape[0] = 1; /* (C, H, W) */
    p.input_shape[1] = 4;
    p.input_shape[2] = 5;
    ck_assert_int_eq(clt_model_param_elements(&s, 20, 3, &p, &P), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 1 (layernorm) normalises the last dimension of flat (F) "
                     "or sequence (T,C) inputs, got 1x4x5; put a flatten before it");
    clt_spec_free(&s);
    ck_assert_int_eq(clt_spec_parse("flatten, layernorm, linear 3", 0, &s), CLT_OK);
    ck_assert_int_eq(clt_model_param_elements(&s, 20, 3, &p, &P), CLT_OK);
    ck_assert_uint_eq(P, 2 * 20 + 20 * 3 + 3);
    clt_spec_free(&s);
}
END_TEST

START_TEST(test_residual)
{
    const char *canon = "residual { conv 64 k3 p1, batchnorm, relu, conv 64 k3 p1, batchnorm }";
    clt_spec s = {0}, back = {0};
    char *text = NULL;
    ck_assert_int_eq(clt_spec_parse(canon, 10, &s), CLT_OK);
    ck_assert_int_eq(s.n, 1);
    ck_assert_int_eq(s.layers[0].kind, CLT_LAYER_RESIDUAL);
    ck_assert_int_eq(s.layers[0].body_n, 5);
    expect_layer(&s.layers[0].body[0], CLT_LAYER_CONV, 64, true, 0);
    ck_assert_int_eq(s.layers[0].body[0].k, 3);
    ck_assert_int_eq(s.layers[0].body[0].pad, 1);
    expect_layer(&s.layers[0].body[1], CLT_LAYER_BATCHNORM, 0, false, 0);
    expect_layer(&s.layers[0].body[2], CLT_LAYER_RELU, 0, false, 0);
    expect_layer(&s.layers[0].body[4], CLT_LAYER_BATCHNORM, 0, false, 0);
    ck_assert_int_eq(clt_spec_to_string(&s, &text), CLT_OK);
    ck_assert_str_eq(text, canon);
    free(text);
    clt_spec_free(&s);
    ck_assert_ptr_null(s.layers);
    /* over lines, tight braces, comments, a trailing comma inside */
    ck_assert_int_eq(clt_spec_parse("conv 8 k3 p1\nresidual {  # a block\n  conv 8 k3 p1,\n"
                                    "  BatchNorm\n}\nrelu, residual{relu, linear 5,}, linear 10",
                                    10, &s),
                     CLT_OK);
    ck_assert_int_eq(s.n, 5);
    ck_assert_int_eq(s.layers[1].body_n, 2);
    ck_assert_int_eq(s.layers[3].body_n, 2);
    ck_assert_int_eq(clt_spec_to_string(&s, &text), CLT_OK);
    ck_assert_str_eq(text, "conv 8 k3 p1, residual { conv 8 k3 p1, batchnorm }, relu, "
                           "residual { relu, linear 5 }, linear 10");
    ck_assert_int_eq(clt_spec_parse(text, 10, &back), CLT_OK);
    expect_same(&s, &back);
    for (int i = 0; i < s.n; i++) {
        ck_assert_int_eq(back.layers[i].body_n, s.layers[i].body_n);
        clt_spec a = {s.layers[i].body_n, s.layers[i].body},
                 b = {back.layers[i].body_n, back.layers[i].body};
        expect_same(&a, &b);
    }
    ck_assert_int_eq(clt_spec_validate(&s, 64, 10), CLT_OK);
    free(text);
    clt_spec_free(&back);
    /* validation of hand-built blocks: the body's kinds check their fields */
    s.layers[1].body[0].k = 0;
    ck_assert_int_eq(clt_spec_validate(&s, 64, 10), CLT_ERR_INVALID_ARG);
    ck_assert(strstr(clt_last_errmsg(), "layer 2: conv kernel size") != NULL);
    s.layers[1].body[0].k = 3;
    s.layers[1].body[1].kind = CLT_LAYER_RESIDUAL;
    ck_assert_int_eq(clt_spec_validate(&s, 64, 10), CLT_ERR_INVALID_ARG);
    ck_assert(strstr(clt_last_errmsg(), "inside a residual block") != NULL);
    s.layers[1].body[1].kind = CLT_LAYER_BATCHNORM;
    s.layers[1].body_n = 0;
    ck_assert_int_eq(clt_spec_validate(&s, 64, 10), CLT_ERR_INVALID_ARG);
    ck_assert(strstr(clt_last_errmsg(), "needs at least one layer") != NULL);
    s.layers[1].body_n = 2;
    clt_spec_free(&s);

    expect_error("residual { conv 8 k3 p1, batchnorm", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"residual\") at column 10: missing '}': the residual "
                 "block opened here is not closed");
    expect_error("linear 4, residual { }, linear 10", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"residual\") at column 20: empty residual block; expected "
                 "its layers between '{' and '}', e.g. \"residual { conv 64 k3 p1, batchnorm }\"");
    expect_error("residual {\n conv 8 k3,\n linaer 3 }, linear 10", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"linaer 3\") at line 3, column 2: unknown layer "
                 "\"linaer\"; expected linear, relu, gelu, tanh, sigmoid, dropout, flatten, silu, "
                 "leakyrelu, conv, maxpool, avgpool, globalavgpool, batchnorm, residual, layernorm, embed, "
                 "posembed or attention");
    expect_error("residual { relu, residual { relu } }", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"residual\") at column 18: a residual block inside a "
                 "residual block is not supported");
    expect_error("residual relu", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"residual relu\") at column 10: unexpected \"relu\"; "
                 "expected '{' after residual");
    expect_error("linear 3, residual", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"residual\") at column 19: expected '{' after residual: "
                 "its layers go in braces, e.g. \"residual { conv 64 k3 p1, batchnorm, relu, "
                 "conv 64 k3 p1, batchnorm }\"");
    expect_error("relu { relu }", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"relu\") at column 6: '{' opens the layers of a block and "
                 "must follow \"residual\"");
    expect_error("residual { relu }}, linear 10", 10, CLT_ERR_FORMAT,
                 "model spec: layer 2 (\"}\") at column 18: unexpected '}': no residual block is "
                 "open");
    expect_error("residual { mlp }", 10, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"mlp\") at column 12: preset \"mlp\" must be the whole "
                 "spec, not one of its layers");

    /* the resnet preset */
    ck_assert_int_eq(clt_spec_parse("resnet", 10, &s), CLT_OK);
    ck_assert_int_eq(clt_spec_to_string(&s, &text), CLT_OK);
    ck_assert_str_eq(
        text, "conv 32 k3 p1, batchnorm, relu, "
              "residual { conv 32 k3 p1, batchnorm, relu, conv 32 k3 p1, batchnorm }, relu, "
              "residual { conv 32 k3 p1, batchnorm, relu, conv 32 k3 p1, batchnorm }, relu, "
              "residual { conv 64 k3 s2 p1, batchnorm, relu, conv 64 k3 p1, batchnorm }, relu, "
              "residual { conv 64 k3 p1, batchnorm, relu, conv 64 k3 p1, batchnorm }, relu, "
              "residual { conv 128 k3 s2 p1, batchnorm, relu, conv 128 k3 p1, batchnorm }, relu, "
              "residual { conv 128 k3 p1, batchnorm, relu, conv 128 k3 p1, batchnorm }, relu, "
              "globalavgpool, linear 10");
    ck_assert_int_eq(clt_spec_parse(text, 10, &back), CLT_OK);
    expect_same(&s, &back);
    free(text);
    clt_spec_free(&back);
    clt_spec_free(&s);
    ck_assert_int_eq(clt_spec_parse("resnet", 12345678, &s), CLT_OK);
    ck_assert_int_eq(s.layers[s.n - 1].out, 12345678);
    clt_spec_free(&s);
}
END_TEST

/* attention H [causal] [nobias]: its words in either order, the canonical text and round trip,
 * parse errors, the parameter count of both projections, and the plan's errors: H not dividing
 * D (both named), an input that is not (T, D), attention as the last layer with weights. */
START_TEST(test_attention)
{
    clt_spec s;
    ck_assert_int_eq(clt_spec_parse("attention 4, Attention 2 nobias causal, attention 1 causal, "
                                    "attention 8 nobias, flatten, linear 3",
                                    3, &s),
                     CLT_OK);
    ck_assert_int_eq(s.n, 6);
    const int heads[4] = {4, 2, 1, 8};
    const bool causal[4] = {false, true, true, false}, bias[4] = {true, false, true, false};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(s.layers[i].kind, CLT_LAYER_ATTENTION);
        ck_assert_int_eq(s.layers[i].heads, heads[i]);
        ck_assert_int_eq(s.layers[i].causal, causal[i]);
        ck_assert_int_eq(s.layers[i].bias, bias[i]);
        ck_assert_int_eq(s.layers[i].out, 0);
    }
    char *text = NULL;
    ck_assert_int_eq(clt_spec_to_string(&s, &text), CLT_OK);
    ck_assert_str_eq(text, "attention 4, attention 2 causal nobias, attention 1 causal, "
                           "attention 8 nobias, flatten, linear 3");
    clt_spec back;
    ck_assert_int_eq(clt_spec_parse(text, 3, &back), CLT_OK);
    ck_assert_int_eq(back.n, s.n);
    ck_assert_mem_eq(back.layers, s.layers, (size_t)s.n * sizeof *s.layers);
    free(text);
    clt_spec_free(&back);
    /* (T, D) = (5, 8): 3D x D + 3D + D x D + D each, nobias without the biases */
    struct clt_model_params p = clt_model_default_params();
    p.input_shape[0] = 5;
    p.input_shape[1] = 8;
    uint64_t P = 0;
    ck_assert_int_eq(clt_spec_validate(&s, 40, 3), CLT_OK);
    ck_assert_int_eq(clt_model_param_elements(&s, 40, 3, &p, &P), CLT_OK);
    ck_assert_uint_eq(P, 2 * (24 * 8 + 24 + 8 * 8 + 8) + 2 * (24 * 8 + 8 * 8) + 40 * 3 + 3);
    /* H must divide D: 3 heads on 8 */
    s.layers[1].heads = 3;
    ck_assert_int_eq(clt_model_param_elements(&s, 40, 3, &p, &P), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 2 (attention 3 causal nobias): 3 heads do not divide the "
                     "width D = 8 of its input 5x8; the number of heads H must divide D");
    s.layers[1].heads = 0; /* built by hand */
    ck_assert_int_eq(clt_spec_validate(&s, 40, 3), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 2: attention heads must be in [1, 16777216], got 0");
    clt_spec_free(&s);
    /* a flat input, an image */
    ck_assert_int_eq(clt_spec_parse("attention 2, flatten, linear 3", 3, &s), CLT_OK);
    ck_assert_int_eq(clt_model_param_elements(&s, 40, 3, NULL, &P), CLT_ERR_INVALID_ARG);
    ck_assert_str_eq(clt_last_errmsg(),
                     "model spec: layer 1 (attention 2) attends over a sequence of T positions "
                     "of D values, (T, D), got 40 (give the data a shape with --input-shape T,D, "
                     "or put it after a layer that outputs one)");
    p.input_shape[0] = 2;
    p.input_shape[1] = 4;
    p.input_shape[2] = 5;
    ck_assert_int_eq(clt_model_param_elements(&s, 40, 3, &p, &P), CLT_ERR_INVALID_ARG);
    ck_assert(strstr(clt_last_errmsg(), "(T, D), got 2x4x5"));
    clt_spec_free(&s);
    /* a model ends with a linear layer */
    ck_assert_int_eq(clt_spec_parse("linear 8, attention 2", 8, &s), CLT_OK);
    ck_assert_int_eq(clt_spec_validate(&s, 40, 8), CLT_ERR_INVALID_ARG);
    ck_assert(strstr(clt_last_errmsg(), "the last layer with weights is layer 2 (attention)"));
    clt_spec_free(&s);
    /* its words */
    expect_error("attention, linear 3", 3, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"attention\") at column 10: attention needs a number of "
                 "heads, e.g. \"attention 4 causal\"");
    expect_error("attention 0, linear 3", 3, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"attention 0\") at column 11: heads must be a positive "
                 "integer, got \"0\"");
    expect_error("attention causal, linear 3", 3, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"attention causal\") at column 11: heads must be a "
                 "positive integer, got \"causal\"");
    expect_error("attention 99999999, linear 3", 3, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"attention 99999999\") at column 11: heads must be at "
                 "most 16777216, got \"99999999\"");
    expect_error("attention 4 causal causal, linear 3", 3, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"attention 4 causal causal\") at column 20: unexpected "
                 "\"causal\" after the heads; expected \"causal\", \"nobias\" (each at most "
                 "once) or the end of the layer");
    expect_error("attention 4 masked, linear 3", 3, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"attention 4 masked\") at column 13: unexpected "
                 "\"masked\" after the heads; expected \"causal\", \"nobias\" (each at most "
                 "once) or the end of the layer");
    expect_error("attention 4 causal nobias 2, linear 3", 3, CLT_ERR_FORMAT,
                 "model spec: layer 1 (\"attention 4 causal nobias 2\") at column 27: "
                 "unexpected \"2\"; attention takes at most \"causal\" and \"nobias\" after "
                 "the heads");
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("spec");
    TCase *tc = tcase_create("spec");
    tcase_add_test(tc, test_parse_all_kinds);
    tcase_add_test(tc, test_parse_comments_newlines_spaces);
    tcase_add_test(tc, test_presets);
    tcase_add_test(tc, test_preset_table);
    tcase_add_test(tc, test_gpt_presets);
    tcase_add_test(tc, test_errors_layers);
    tcase_add_test(tc, test_errors_dropout);
    tcase_add_test(tc, test_errors_positions_and_empty);
    tcase_add_test(tc, test_errors_too_many_layers);
    tcase_add_test(tc, test_check_output);
    tcase_add_test(tc, test_validate);
    tcase_add_test(tc, test_to_string_round_trip);
    tcase_add_test(tc, test_parse_file);
    tcase_add_test(tc, test_kind_names);
    tcase_add_test(tc, test_conv);
    tcase_add_test(tc, test_pool);
    tcase_add_test(tc, test_residual);
    tcase_add_test(tc, test_layernorm);
    tcase_add_test(tc, test_attention);
    tcase_add_test(tc, test_too_large);
    suite_add_tcase(suite, tc);
    return tc_run(suite);
}
