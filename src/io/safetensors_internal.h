/* safetensors checkpoint files: an 8-byte little-endian header length N, N bytes of JSON
 * (tensor name -> dtype, shape, data_offsets; optional "__metadata__" of string -> string),
 * then the raw little-endian row-major data. Files are written atomically and every byte of a
 * file read is validated. Readable by the Python `safetensors` package, PyTorch and numpy. */
#ifndef CLTRAIN_SAFETENSORS_INTERNAL_H
#define CLTRAIN_SAFETENSORS_INTERNAL_H

#include "cltrain/status.h"
#include "cltrain/tensor.h"

#include <stddef.h>
#include <stdint.h>

#define CLT_ST_NAME_MAX 256 /* bytes in a tensor name, with its terminating NUL */

/* A file-only dtype: "I64", 64-bit signed integers (PyTorch's int64, e.g. batchnorm's
 * num_batches_tracked). No device tensor has it: clt_dtype_name gives "unknown",
 * clt_st_dtype_name "i64". */
#define CLT_ST_I64 ((clt_dtype)64)

/* One tensor of a file. Dtypes map F32, F16, BF16, I32, U8 <-> CLT_DTYPE_* and I64 <->
 * CLT_ST_I64; others are refused. ndim is 0 (a scalar) to 4; shape[i] for i >= ndim is 1. nbytes is
 * numel * element size. For writing, `data` is the caller's memory (may be NULL when nbytes is
 * 0). For reading, `data` points into the file's data section, owned by the clt_st_file and valid
 * until clt_st_close; the data section starts 8-byte aligned in memory, but a tensor is only
 * as aligned as its offset in the file (files from clt_st_write lay tensors out contiguously in
 * the order given, so put the widest dtypes first for aligned reads, or memcpy). */
typedef struct clt_st_tensor {
    char name[CLT_ST_NAME_MAX]; /* UTF-8, NUL-terminated, not "__metadata__" */
    clt_dtype dtype;
    int ndim;
    int64_t shape[CLT_MAX_DIMS];
    const void *data;
    size_t nbytes;
} clt_st_tensor;

/* Writes the n tensors (in the order given, contiguous) and the nmeta metadata pairs (strings,
 * stored escaped in "__metadata__"; put numbers or JSON arrays in them as text) to `path`.
 * The header is padded with spaces so that the data section starts 8-byte aligned in the file.
 * Atomic, through clt_outfile_open (cltrain/outfile.h): the bytes go to a new temporary file
 * "<path>.tmp.<pid>.<k>" in the same folder, which is flushed, fsync'ed and renamed over
 * `path`; on any failure the temporary file is removed and an existing `path` is left as it
 * was. A symlink is followed (its target is replaced, the link stays); a `path` that is a
 * directory, FIFO, device or socket is refused. Returns CLT_ERR_INVALID_ARG (NULL pointers
 * where data is needed, n or nmeta negative, ndim outside 0..4, a negative dimension, nbytes
 * != numel * element size, an unknown dtype, a name or metadata text that is not valid UTF-8,
 * a name of CLT_ST_NAME_MAX bytes or more without NUL, "__metadata__" as a tensor name,
 * duplicate tensor names or metadata keys), CLT_ERR_IO (cannot create, write, sync or rename;
 * the message names the file and the system's reason), CLT_ERR_HOST_MEMORY, or
 * CLT_ERR_UNSUPPORTED on a big-endian host. Messages: clt_last_errmsg(). Thread-safe (for
 * different paths; two concurrent writers of one path leave one complete file). */
clt_status clt_st_write(const char *path, const clt_st_tensor *tensors, int n,
                        const char *const *meta_keys, const char *const *meta_values,
                        int nmeta);

/* A file dtype's name for messages, as clt_dtype_name spells device dtypes: "f32", "f16",
 * "bf16", "i32", "u8", and "i64" for CLT_ST_I64. */
const char *clt_st_dtype_name(clt_dtype d);

typedef struct clt_st_file clt_st_file;

/* Reads and validates the safetensors file at `path`: a regular file (opened without blocking;
 * a FIFO, directory, device or socket is refused with CLT_ERR_IO before anything is read); at
 * least 8 bytes; the header length inside the file and at most 100,000,000 bytes; the header a
 * well-formed JSON object (the message gives the byte position); every tensor entry an object
 * with a known "dtype" string, a "shape" of at most 4 non-negative integers and "data_offsets"
 * [begin, end] of integers with begin <= end <= the data section's size and end - begin ==
 * numel * element size; tensor names unique, under CLT_ST_NAME_MAX bytes and free of NUL; no
 * two tensors' bytes overlapping (rejected; gaps are tolerated); the file ending where the last
 * tensor ends (trailing bytes are refused, naming the file's size and the header's end, before
 * the data section is read); "__metadata__", if present, an object of strings without NUL.
 * Extra keys inside a tensor entry are ignored. Only the header and the data section are read,
 * each once. On success *out owns the data's memory; release it with clt_st_close. Returns
 * CLT_ERR_IO (cannot open or read, not a regular file), CLT_ERR_FORMAT (any violation above; a
 * one-line message naming the file and what was wrong), CLT_ERR_HOST_MEMORY,
 * CLT_ERR_INVALID_ARG (NULL out or path), or CLT_ERR_UNSUPPORTED on a big-endian host.
 * Messages: clt_last_errmsg(). Thread-safe. */
clt_status clt_st_open(clt_st_file **out, const char *path);
/* Releases the file and all its memory (every data pointer obtained from it). Accepts NULL. */
void clt_st_close(clt_st_file *f);

/* Number of tensors in the file. */
int clt_st_count(const clt_st_file *f);
/* The i-th tensor in header order (the order they were written), NULL if i is out of range.
 * Owned by f. */
const clt_st_tensor *clt_st_get(const clt_st_file *f, int i);
/* The tensor named `name` (binary search), NULL if absent. Owned by f. */
const clt_st_tensor *clt_st_find(const clt_st_file *f, const char *name);
/* The metadata value for `key`, NULL if absent. Owned by f. */
const char *clt_st_meta(const clt_st_file *f, const char *key);
/* Number of metadata pairs, and the i-th key in header order (NULL if i is out of range). */
int clt_st_meta_count(const clt_st_file *f);
const char *clt_st_meta_key(const clt_st_file *f, int i);

/* The lookups above only read f: any number of threads may use one open file at once. A NULL
 * f, name or key is a programmer error (CLT_ASSERT). */

#endif
