/* CLT_API marks the functions of the public API. The shared library is built with hidden
 * visibility (meson: gnu_symbol_visibility 'hidden'), so these are the only symbols it
 * exports; tests/portability/exported_symbols.sh compares the export list with the headers. Every
 * public header includes this one.
 *
 * Usage:
 *
 *     CLT_API clt_status clt_tensor_create(clt_tensor **out, ...);  // in a public header
 */
#ifndef CLTRAIN_EXPORT_H
#define CLTRAIN_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define CLT_API __attribute__((visibility("default")))
#else
#define CLT_API
#endif

#endif
