/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, as iSCSI, ext4 and Btrfs use), in
 * software: table-driven, eight bytes per step. Checkpoints store one per tensor. Private to
 * the library. */
#ifndef CLTRAIN_IO_CRC32C_H
#define CLTRAIN_IO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of data[0..n) continued from `crc` (start with 0): clt__crc32c(0, "123456789", 9)
 * is 0xE3069283, and clt__crc32c(clt__crc32c(0, a, k), a + k, n - k) == clt__crc32c(0, a, n).
 * Thread-safe (the tables are built once, on first use, under a once-flag). */
uint32_t clt__crc32c(uint32_t crc, const void *data, size_t n);

#endif
