/* The training layer's private side, shared by the trainer, the checkpoints and the tests:
 * the identity of a training split that a run's geometry records. */
#ifndef CLTRAIN_TRAIN_INTERNAL_H
#define CLTRAIN_TRAIN_INTERNAL_H

#include "cltrain/data.h"

#include <stdint.h>

/* The training split's identity for clt_run_geometry: CRC-32C of its labels (or regression
 * targets) followed by the first MiB of its inputs as stored (u8 pixels or f32 values).
 * Thread-safe. */
uint32_t clt__checkpoint_data_crc32c(const clt_dataset *d);

#endif
