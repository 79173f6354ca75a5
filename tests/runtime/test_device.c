/* Unit tests of the runtime's pure parts, with no OpenCL call: the device selector grammar and
 * the `auto` choice over synthetic device lists, the no-device messages, status and OpenCL
 * error names, and size parsing and formatting. */
#include "common.h"
#include "cltrain/alloc.h"
#include "cltrain/device.h"
#include "cltrain/status.h"
#include "ops/tune_internal.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A synthetic descriptor as clt_device_list would fill it (no cl_* handles). */
static clt_device_info dev(int index, int plat, int d, clt_device_type type, const char *platform,
                           const char *platform_version, const char *name, unsigned cus,
                           unsigned mhz, uint64_t mem)
{
    clt_device_info i;
    memset(&i, 0, sizeof i);
    i.index = index;
    i.platform_index = plat;
    i.device_index = d;
    i.type = type;
    snprintf(i.platform_name, sizeof i.platform_name, "%s", platform);
    snprintf(i.platform_version, sizeof i.platform_version, "%s", platform_version);
    snprintf(i.device_name, sizeof i.device_name, "%s", name);
    i.compute_units = cus;
    i.clock_mhz = mhz;
    i.global_mem = mem;
    i.max_alloc = mem / 4;
    return i;
}

#define GIB (1024ull * 1024 * 1024)
#define POCL_PLATFORM "Portable Computing Language"
#define POCL_VERSION "OpenCL 3.0 PoCL 3.1+debian  Linux, None+Asserts, RELOC, SPIR, LLVM 15.0.6"
#define POCL_DEVICE "pthread-skylake-avx512-Intel(R) Xeon(R) Processor @ 2.80GHz"

static clt_device_info pocl(int index, int plat)
{
    return dev(index, plat, 0, CLT_DEVICE_CPU, POCL_PLATFORM, POCL_VERSION, POCL_DEVICE, 2, 2793,
               8 * GIB);
}

/* The chosen position, or fails the test with the message. */
static int pick(const clt_device_info *devs, int n, const char *sel)
{
    int chosen = -2;
    clt_status st = clt_device_select(devs, n, sel, &chosen);
    ck_assert_msg(st == CLT_OK, "selector \"%s\" -> %s: %s", sel, clt_status_name(st),
                  clt_last_errmsg());
    ck_assert_msg(chosen >= 0 && chosen < n, "selector \"%s\" chose %d of %d", sel, chosen, n);
    return chosen;
}

/* Asserts CLT_ERR_NO_DEVICE with *chosen = -1; returns the message. */
static const char *no_pick(const clt_device_info *devs, int n, const char *sel)
{
    int chosen = 5;
    clt_status st = clt_device_select(devs, n, sel, &chosen);
    ck_assert_msg(st == CLT_ERR_NO_DEVICE,
                  "selector \"%s\" -> %s (chose %d), expected "
                  "CLT_ERR_NO_DEVICE",
                  sel, clt_status_name(st), chosen);
    ck_assert_int_eq(chosen, -1);
    const char *msg = clt_last_errmsg();
    ck_assert_msg(strchr(msg, '\n') == NULL, "the message is one line: %s", msg);
    ck_assert_msg(strstr(msg, sel) != NULL, "the message names the selector \"%s\": %s", sel, msg);
    return msg;
}

START_TEST(test_nvidia_and_pocl)
{
    clt_device_info d[2] = {
        dev(0, 0, 0, CLT_DEVICE_GPU, "NVIDIA CUDA", "OpenCL 3.0 CUDA 12.4.131", "NVIDIA H200", 132,
            1980, 140 * GIB),
        pocl(1, 1),
    };
    ck_assert_int_eq(pick(d, 2, "auto"), 0);
    ck_assert_int_eq(pick(d, 2, NULL), 0);     /* NULL means auto */
    ck_assert_int_eq(pick(d, 2, ""), 0);       /* so does empty */
    ck_assert_int_eq(pick(d, 2, " AUTO "), 0); /* case and surrounding blanks ignored */
    ck_assert_int_eq(pick(d, 2, "gpu"), 0);
    ck_assert_int_eq(pick(d, 2, "cpu"), 1);
    ck_assert_int_eq(pick(d, 2, "CPU"), 1);
    ck_assert_int_eq(pick(d, 2, "nvidia"), 0);
    ck_assert_int_eq(pick(d, 2, "H200"), 0);
    ck_assert_int_eq(pick(d, 2, "0:0"), 0);
    ck_assert_int_eq(pick(d, 2, "1:0"), 1);
    ck_assert_int_eq(pick(d, 2, "0"), 0);
    ck_assert_int_eq(pick(d, 2, "1"), 1);
    ck_assert_int_eq(pick(d, 2, "POCL"), 1); /* only in PoCL's platform version */
    ck_assert_int_eq(pick(d, 2, "pocl"), 1);
    ck_assert_int_eq(pick(d, 2, "portable"), 1);
    ck_assert_int_eq(pick(d, 2, "skylake"), 1);
    no_pick(d, 2, "accelerator");
    no_pick(d, 2, "0:1");
    no_pick(d, 2, "2:0");
    /* Digits only are an index, "P:D" digits on both sides; anything else is only a name
     * substring, so a stray character or sign never selects a device by number. */
    no_pick(d, 2, "1x");
    no_pick(d, 2, "1:0junk");
    no_pick(d, 2, "-1");
    no_pick(d, 2, "+1");
    no_pick(d, 2, "1:-0");
    no_pick(d, 2, "99999999999999999999"); /* beyond 64 bits: no saturation to some index */
    no_pick(d, 2, "4294967297");           /* 2^32 + 1: no truncation to 1 */
    no_pick(d, 2, "1:4294967296");
    ck_assert_int_eq(pick(d, 2, "01"), 1);
    ck_assert_int_eq(pick(d, 2, " 1:0 "), 1);
}
END_TEST

START_TEST(test_selector_digits_vs_names)
{
    /* "1x" is part of a name here, so it matches that name, not device 1; "1030" is digits
     * only, so it is an index even though a device is named gfx1030. */
    clt_device_info d[2] = {
        dev(0, 0, 0, CLT_DEVICE_GPU, "Vendor", "OpenCL 3.0", "Accel 1x-large", 8, 1000, 8 * GIB),
        dev(1, 0, 1, CLT_DEVICE_GPU, "Vendor", "OpenCL 3.0", "gfx1030", 8, 1000, 8 * GIB),
    };
    ck_assert_int_eq(pick(d, 2, "1x"), 0);
    ck_assert_int_eq(pick(d, 2, "1X-L"), 0);
    ck_assert_int_eq(pick(d, 2, "gfx1030"), 1);
    ck_assert_int_eq(pick(d, 2, "1"), 1);
    ck_assert_int_eq(pick(d, 2, "0:1"), 1);
    no_pick(d, 2, "1030");
    no_pick(d, 2, "0:1junk");
}
END_TEST

START_TEST(test_amd_intel_pocl)
{
    /* AMD 60 x 2100 = 126000 beats Intel 96 x 1300 = 124800, though Intel is listed first
     * and has more compute units. */
    clt_device_info d[3] = {
        dev(0, 0, 0, CLT_DEVICE_GPU, "Intel(R) OpenCL Graphics", "OpenCL 3.0 ",
            "Intel(R) Arc(TM) A770 Graphics", 96, 1300, 16 * GIB),
        dev(1, 1, 0, CLT_DEVICE_GPU, "AMD Accelerated Parallel Processing",
            "OpenCL 2.1 AMD-APP (3513.0)", "gfx1030", 60, 2100, 16 * GIB),
        pocl(2, 2),
    };
    ck_assert_int_eq(pick(d, 3, "auto"), 1);
    ck_assert_int_eq(pick(d, 3, "gpu"), 1);
    ck_assert_int_eq(pick(d, 3, "intel"), 0); /* first match in listing order (PoCL's name too) */
    ck_assert_int_eq(pick(d, 3, "amd"), 1);
    ck_assert_int_eq(pick(d, 3, "cpu"), 2);
    ck_assert_int_eq(pick(d, 3, "2"), 2);
    ck_assert_int_eq(pick(d, 3, "1:0"), 1);

    /* Equal compute units x clock (48 x 2600 = 96 x 1300): more global memory wins... */
    d[1] = dev(1, 1, 0, CLT_DEVICE_GPU, "AMD Accelerated Parallel Processing",
               "OpenCL 2.1 AMD-APP (3513.0)", "gfx1030", 48, 2600, 24 * GIB);
    ck_assert_int_eq(pick(d, 3, "auto"), 1);
    d[1].global_mem = 8 * GIB;
    ck_assert_int_eq(pick(d, 3, "auto"), 0);
    /* ...and a complete tie goes to the first listed. */
    d[1].global_mem = d[0].global_mem;
    ck_assert_int_eq(pick(d, 3, "auto"), 0);
}
END_TEST

START_TEST(test_accelerator_over_cpu)
{
    clt_device_info d[3] = {
        dev(0, 0, 0, CLT_DEVICE_CPU, "Intel(R) CPU Runtime for OpenCL(TM) Applications",
            "OpenCL 3.0 WINDOWS", "Intel(R) Xeon(R) Platinum 8480+", 112, 3800, 512 * GIB),
        dev(1, 1, 0, CLT_DEVICE_ACCELERATOR, "Intel(R) FPGA SDK for OpenCL(TM)", "OpenCL 1.2",
            "de10_pro : Agilex", 1, 400, 8 * GIB),
        pocl(2, 2),
    };
    ck_assert_int_eq(pick(d, 3, "auto"), 1);
    ck_assert_int_eq(pick(d, 3, "accelerator"), 1);
    ck_assert_int_eq(pick(d, 3, "cpu"), 0); /* 112 x 3800 beats PoCL's 2 x 2793 */
    no_pick(d, 3, "gpu");
    /* A GPU, however small, wins over both. */
    clt_device_info e[4] = {
        d[0], d[1], d[2],
        dev(3, 3, 0, CLT_DEVICE_GPU, "Mesa", "OpenCL 1.1 Mesa", "llvmpipe", 1, 100, 1 * GIB)};
    ck_assert_int_eq(pick(e, 4, "auto"), 3);
    /* Without the accelerator, the best CPU. */
    clt_device_info c[2] = {pocl(0, 0), d[0]};
    c[1].index = 1;
    ck_assert_int_eq(pick(c, 2, "auto"), 1);
}
END_TEST

START_TEST(test_only_pocl)
{
    clt_device_info d[1] = {pocl(0, 0)};
    ck_assert_int_eq(pick(d, 1, "auto"), 0);
    ck_assert_int_eq(pick(d, 1, "cpu"), 0);
    /* PoCL is there: the hints for a missing GPU never suggest installing it */
    const char *gpu_sels[] = {"gpu", "nvidia", "nosuchdevice"};
    for (size_t i = 0; i < sizeof gpu_sels / sizeof *gpu_sels; i++) {
        const char *msg = no_pick(d, 1, gpu_sels[i]);
        ck_assert_msg(strstr(msg, POCL_DEVICE) != NULL, "lists the found device: %s", msg);
        ck_assert_msg(strstr(msg, "pocl-opencl-icd") == NULL, "PoCL is installed: %s", msg);
        ck_assert_msg(strstr(msg, "vendor's OpenCL driver") != NULL, "a GPU's driver: %s", msg);
    }
    const char *msg = no_pick(d, 1, "9");
    ck_assert_msg(strstr(msg, POCL_DEVICE) != NULL, "lists the found device: %s", msg);
    ck_assert_msg(strstr(msg, "install") == NULL, "an index needs no install hint: %s", msg);
    no_pick(d, 1, "1");
    no_pick(d, 1, "0:1");
    no_pick(d, 1, "accelerator");
}
END_TEST

START_TEST(test_gpu_without_cpu)
{
    /* a GPU alone: "cpu" and "pocl" suggest PoCL, "nvidia" (the GPU is AMD's) its driver */
    clt_device_info d[1] = {dev(0, 0, 0, CLT_DEVICE_GPU, "AMD Accelerated Parallel Processing",
                                "OpenCL 2.1 AMD-APP", "gfx1030", 40, 2500, 16 * GIB)};
    const char *msg = no_pick(d, 1, "cpu");
    ck_assert_msg(strstr(msg, "gfx1030") != NULL, "lists the found device: %s", msg);
    ck_assert_msg(strstr(msg, "apt-get install pocl-opencl-icd") != NULL, "PoCL for a CPU: %s",
                  msg);
    msg = no_pick(d, 1, "pocl");
    ck_assert_msg(strstr(msg, "apt-get install pocl-opencl-icd") != NULL, "%s", msg);
    msg = no_pick(d, 1, "nvidia");
    ck_assert_msg(strstr(msg, "pocl") == NULL, "no PoCL for a GPU: %s", msg);
    ck_assert_msg(strstr(msg, "vendor's OpenCL driver") != NULL, "%s", msg);
}
END_TEST

START_TEST(test_nothing)
{
    const char *sels[] = {"auto", "gpu", "cpu", "accelerator", "0", "0:0", "pocl"};
    for (size_t i = 0; i < sizeof sels / sizeof *sels; i++) {
        const char *msg = no_pick(NULL, 0, sels[i]);
        ck_assert_msg(strstr(msg, "pocl") != NULL, "mentions pocl: %s", msg);
        ck_assert_msg(strstr(msg, "apt-get install pocl-opencl-icd") != NULL, "%s", msg);
    }
}
END_TEST

START_TEST(test_out_of_range_and_garbage)
{
    clt_device_info d[2] = {
        dev(0, 0, 0, CLT_DEVICE_GPU, "NVIDIA CUDA", "OpenCL 3.0 CUDA 12.4.131", "NVIDIA H200", 132,
            1980, 140 * GIB),
        pocl(1, 1),
    };
    const char *bad[] = {"9", "nosuchdevice", "-1", "1:", ":0", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *msg = no_pick(d, 2, bad[i]);
        ck_assert_msg(strstr(msg, "NVIDIA H200") && strstr(msg, POCL_DEVICE),
                      "lists both devices: %s", msg);
        ck_assert_msg(strstr(msg, "found 2") != NULL, "says how many were found: %s", msg);
    }
}
END_TEST

START_TEST(test_status_names)
{
    ck_assert_str_eq(clt_status_name(CLT_OK), "CLT_OK");
    ck_assert_str_eq(clt_status_name(CLT_ERR_OUT_OF_MEMORY), "CLT_ERR_OUT_OF_MEMORY");
    ck_assert_str_eq(clt_status_name(CLT_ERR_INTERRUPTED), "CLT_ERR_INTERRUPTED");
    ck_assert_str_eq(clt_status_name((clt_status)-999), "CLT_STATUS_UNKNOWN");
    ck_assert_str_eq(clt_status_name((clt_status)1), "CLT_STATUS_UNKNOWN");
    ck_assert_str_eq(clt_status_str(CLT_OK), "success");
    ck_assert_str_eq(clt_status_str(CLT_ERR_OUT_OF_MEMORY), "out of device memory");
    ck_assert_str_eq(clt_status_str((clt_status)-999), "unknown status");
    /* Every code in the table: a distinct value, its own name, a non-empty message; errors < 0. */
    static const struct {
        clt_status s;
        const char *name;
    } all[] = {
#define ROW(name, value, msg) {name, #name},
        CLT_STATUS_TABLE(ROW)
#undef ROW
    };
    size_t n = sizeof all / sizeof *all;
    ck_assert_uint_ge(n, 16);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(clt_status_name(all[i].s), all[i].name);
        ck_assert_uint_gt(strlen(clt_status_str(all[i].s)), 0);
        ck_assert_str_ne(clt_status_str(all[i].s), "unknown status");
        ck_assert(i == 0 ? all[i].s == 0 : all[i].s < 0);
        for (size_t j = 0; j < i; j++)
            ck_assert_int_ne(all[i].s, all[j].s);
    }
}
END_TEST

START_TEST(test_cl_error_names)
{
    ck_assert_str_eq(clt_cl_error_name(-54), "CL_INVALID_WORK_GROUP_SIZE");
    ck_assert_str_eq(clt_cl_error_name(0), "CL_SUCCESS");
    ck_assert_str_eq(clt_cl_error_name(-4), "CL_MEM_OBJECT_ALLOCATION_FAILURE");
    ck_assert_str_eq(clt_cl_error_name(-11), "CL_BUILD_PROGRAM_FAILURE");
    ck_assert_str_eq(clt_cl_error_name(-61), "CL_INVALID_BUFFER_SIZE");
    ck_assert_str_eq(clt_cl_error_name(-1001), "CL_PLATFORM_NOT_FOUND_KHR");
    ck_assert_str_eq(clt_cl_error_name(-25), "CL_UNKNOWN_ERROR"); /* a gap in the spec */
    ck_assert_str_eq(clt_cl_error_name(12345), "CL_UNKNOWN_ERROR");
    /* CLBlast shares OpenCL's codes and adds its own. */
    ck_assert_str_eq(clt_clblast_error_name(-54), "CL_INVALID_WORK_GROUP_SIZE");
    ck_assert_str_ne(clt_clblast_error_name(-1024), "CL_UNKNOWN_ERROR");
    ck_assert_ptr_nonnull(strstr(clt_clblast_error_name(-1024), "NotImplemented"));
}
END_TEST

START_TEST(test_parse_size)
{
    static const struct {
        const char *s;
        uint64_t v;
    } good[] = {
        {"512M", 512ull << 20}, {"1.5G", 3ull << 29}, {"64k", 64ull << 10},
        {"64K", 64ull << 10},   {"1048576", 1048576}, {"0", 0},
        {"2G", 2ull << 30},     {"1T", 1ull << 40},   {"1M", 1ull << 20},
        {"1MiB", 1ull << 20},   {"1MB", 1ull << 20},  {"12", 12},
        {"0.5k", 512},          {"16g", 16ull << 30},
        /* exact beyond double's 53 bits, up to the full range */
        {"9007199254740993", 9007199254740993ull}, {"18446744073709551615", UINT64_MAX},
        {"16777215T", 16777215ull << 40}, {"12B", 12}, {"1.25KiB", 1280},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        uint64_t v = 7;
        clt_status st = clt_parse_size(good[i].s, &v);
        ck_assert_msg(st == CLT_OK, "\"%s\" -> %s", good[i].s, clt_status_name(st));
        ck_assert_msg(v == good[i].v, "\"%s\" -> %llu, expected %llu", good[i].s,
                      (unsigned long long)v, (unsigned long long)good[i].v);
    }
    const char *bad[] = {"lots", "",    "M",      "-1",  "1X",  "1 M",
                         " 1M",  "1MM", "1.5.5G", "nan", "inf", "100000000T",
                         /* strtod's grammar is not the size grammar */
                         "1e3", "0x10", "1.5", "1iB", "+1", "1.", ".5K", "1M ", "1Mx",
                         "18446744073709551616", "16777216T", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t v = 7;
        clt_status st = clt_parse_size(bad[i], &v);
        ck_assert_msg(st == CLT_ERR_INVALID_ARG, "\"%s\" -> %s", bad[i], clt_status_name(st));
        ck_assert_msg(v == 7, "\"%s\" wrote its output on failure", bad[i]);
    }
    uint64_t v = 7;
    ck_assert_int_eq(clt_parse_size(NULL, &v), CLT_ERR_INVALID_ARG);
}
END_TEST

/* The tuning choice's numbers go through the strict parser: no sign, no overflow. */
START_TEST(test_gemm_choice_numbers)
{
    struct clt_gemm_choice c;
    ck_assert_int_eq(clt_gemm_choice_parse("direct tm4 tn16 vw4 wg2x1", &c), CLT_OK);
    ck_assert_int_eq(c.tm, 4);
    ck_assert_int_eq(c.wgm, 2);
    ck_assert_int_eq(c.wgn, 1);
    const char *bad[] = {"direct tm+4",   "direct tm-4",  "direct tm4x",  "direct wg+2x1",
                         "direct wg2x+1", "direct wg2x",  "direct wgx1",  "direct tm4097",
                         "direct tm99999999999999999999", "direct tm",   "direct wg2x1x1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(clt_gemm_choice_parse(bad[i], &c) == CLT_ERR_INVALID_ARG, "\"%s\" accepted",
                      bad[i]);
}
END_TEST

START_TEST(test_format_bytes)
{
    static const struct {
        uint64_t b;
        const char *s;
    } rows[] = {
        {0, "0 B"},
        {12, "12 B"},
        {1023, "1023 B"},
        {1024, "1.0 KiB"},
        {1536, "1.5 KiB"},
        {300ull << 20, "300.0 MiB"},
        {3ull << 29, "1.5 GiB"},
        {140ull << 30, "140.0 GiB"},
        {5ull << 40, "5.0 TiB"},
        {2048ull << 40, "2048.0 TiB"}, /* TiB is the largest unit */
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        char buf[32];
        memset(buf, 'x', sizeof buf);
        clt_format_bytes(rows[i].b, buf, sizeof buf);
        ck_assert_str_eq(buf, rows[i].s);
    }
    /* A short buffer gets a terminated prefix, never an overrun. */
    char small[5];
    memset(small, 'x', sizeof small);
    clt_format_bytes(300ull << 20, small, sizeof small);
    ck_assert_str_eq(small, "300.");
}
END_TEST

START_TEST(test_names)
{
    ck_assert_str_eq(clt_device_type_name(CLT_DEVICE_GPU), "gpu");
    ck_assert_str_eq(clt_device_type_name(CLT_DEVICE_ACCELERATOR), "accelerator");
    ck_assert_str_eq(clt_device_type_name(CLT_DEVICE_CPU), "cpu");
    ck_assert_str_eq(clt_device_type_name(CLT_DEVICE_OTHER), "other");
    ck_assert_str_eq(clt_wait_reason_name(CLT_WAIT_LOG), "log");
    ck_assert_str_eq(clt_wait_reason_name(CLT_WAIT_SETUP), "setup");
    ck_assert_str_eq(clt_wait_reason_name(CLT_WAIT__COUNT), "unknown");
    ck_assert_str_eq(clt_mem_category_name(CLT_MEM_PARAMS), "parameters");
    ck_assert_str_eq(clt_mem_category_name(CLT_MEM_STAGING), "staging");
    ck_assert_str_eq(clt_mem_category_name(CLT_MEM__COUNT), "unknown");
    static const size_t sizes[CLT_DTYPE__COUNT] = {4, 2, 2, 4, 1, 2};
    static const char *names[CLT_DTYPE__COUNT] = {"f32", "f16", "bf16", "i32", "u8", "u16"};
    for (int d = 0; d < CLT_DTYPE__COUNT; d++) {
        clt_dtype parsed = CLT_DTYPE__COUNT;
        ck_assert_uint_eq(clt_dtype_size((clt_dtype)d), sizes[d]);
        ck_assert_str_eq(clt_dtype_name((clt_dtype)d), names[d]);
        ck_assert_int_eq(clt_dtype_parse(names[d], &parsed), CLT_OK);
        ck_assert_int_eq(parsed, d);
    }
    clt_dtype parsed;
    ck_assert_int_eq(clt_dtype_parse("BFloat16", &parsed), CLT_OK);
    ck_assert_int_eq(parsed, CLT_DTYPE_BF16);
    ck_assert_int_eq(clt_dtype_parse("fp8", &parsed), CLT_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(clt_last_errmsg(), "fp8"));
}
END_TEST

/* The matches of sel as a string of positions ("2,0,1"; "" for CLT_ERR_NO_DEVICE, whose
 * message must name the selector). Every selector's first match is clt_device_select's pick. */
static const char *matches(const clt_device_info *devs, int n, const char *sel)
{
    static char out[64];
    int idx[8] = {-1, -1, -1, -1, -1, -1, -1, -1}, count = -1;
    ck_assert_int_le(n, 8);
    clt_status st = clt_device_matches(devs, n, sel, idx, &count);
    out[0] = '\0';
    if (st != CLT_OK) {
        ck_assert_int_eq(st, CLT_ERR_NO_DEVICE);
        ck_assert_int_eq(count, 0);
        ck_assert_msg(strstr(clt_last_errmsg(), sel) != NULL, "names \"%s\": %s", sel,
                      clt_last_errmsg());
        no_pick(devs, n, sel);
        return out;
    }
    ck_assert_int_ge(count, 1);
    ck_assert_int_eq(idx[0], pick(devs, n, sel));
    for (int i = 0; i < count; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%d", i ? "," : "", idx[i]);
    return out;
}

START_TEST(test_matches)
{
    /* Two small GPUs listed before a big one, on two platforms, then PoCL: types and auto
     * best first (ties in listing order), names and numbers in listing order. */
    clt_device_info d[5] = {
        dev(0, 0, 0, CLT_DEVICE_GPU, "NVIDIA CUDA", "OpenCL 3.0 CUDA 12.4", "NVIDIA L4", 58, 2040,
            22 * GIB),
        dev(1, 0, 1, CLT_DEVICE_GPU, "NVIDIA CUDA", "OpenCL 3.0 CUDA 12.4", "NVIDIA L4", 58, 2040,
            22 * GIB),
        dev(2, 0, 2, CLT_DEVICE_GPU, "NVIDIA CUDA", "OpenCL 3.0 CUDA 12.4", "NVIDIA H200", 132,
            1980, 140 * GIB),
        pocl(3, 1),
        dev(4, 2, 0, CLT_DEVICE_ACCELERATOR, "FPGA SDK", "OpenCL 1.2", "fpga", 1, 400, 8 * GIB),
    };
    ck_assert_str_eq(matches(d, 5, "auto"), "2,0,1");
    ck_assert_str_eq(matches(d, 5, " GPU "), "2,0,1");
    ck_assert_str_eq(matches(d, 5, "cpu"), "3");
    ck_assert_str_eq(matches(d, 5, "accelerator"), "4");
    ck_assert_str_eq(matches(d, 5, "nvidia"), "0,1,2");
    ck_assert_str_eq(matches(d, 5, "l4"), "0,1");
    ck_assert_str_eq(matches(d, 5, "pocl"), "3");
    ck_assert_str_eq(matches(d, 5, "1"), "1");
    ck_assert_str_eq(matches(d, 5, "0:2"), "2");
    ck_assert_str_eq(matches(d, 5, "2:0"), "4");
    ck_assert_str_eq(matches(d, 5, "9"), "");
    ck_assert_str_eq(matches(d, 5, "0:3"), "");
    ck_assert_str_eq(matches(d, 5, "1x"), "");
    ck_assert_str_eq(matches(d, 5, "nosuchdevice"), "");
    /* Without GPUs, auto matches the accelerators; without those, every CPU. */
    ck_assert_str_eq(matches(d + 3, 2, "auto"), "1");
    clt_device_info c[3] = {pocl(0, 0), pocl(1, 1), pocl(2, 2)};
    ck_assert_str_eq(matches(c, 3, "auto"), "0,1,2");
    ck_assert_str_eq(matches(c, 3, "gpu"), "");
    ck_assert_str_eq(matches(NULL, 0, "auto"), "");
}
END_TEST

static void default_selector_case(const char *env, const char *expected)
{
    if (env)
        setenv("CLTRAIN_DEVICE", env, 1);
    else
        unsetenv("CLTRAIN_DEVICE");
    ck_assert_str_eq(clt_device_default_selector(), expected);
}

START_TEST(test_default_selector)
{
    /* restored afterwards: with CK_FORK=no later tests run in this process */
    const char *was = getenv("CLTRAIN_DEVICE");
    char *saved = was ? strdup(was) : NULL;
    default_selector_case(NULL, "auto");
    default_selector_case("", "auto");
    default_selector_case("cpu", "cpu");
    default_selector_case("1:0", "1:0");
    default_selector_case(saved, saved && *saved ? saved : "auto");
    free(saved);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("device");
    TCase *tc = tcase_create("select");
    tcase_add_test(tc, test_nvidia_and_pocl);
    tcase_add_test(tc, test_amd_intel_pocl);
    tcase_add_test(tc, test_accelerator_over_cpu);
    tcase_add_test(tc, test_only_pocl);
    tcase_add_test(tc, test_gpu_without_cpu);
    tcase_add_test(tc, test_nothing);
    tcase_add_test(tc, test_out_of_range_and_garbage);
    tcase_add_test(tc, test_default_selector);
    tcase_add_test(tc, test_selector_digits_vs_names);
    tcase_add_test(tc, test_matches);
    tcase_add_test(tc, test_gemm_choice_numbers);
    suite_add_tcase(s, tc);
    TCase *names = tcase_create("names");
    tcase_add_test(names, test_status_names);
    tcase_add_test(names, test_cl_error_names);
    tcase_add_test(names, test_parse_size);
    tcase_add_test(names, test_format_bytes);
    tcase_add_test(names, test_names);
    suite_add_tcase(s, names);
    return tc_run(s);
}
