//===- Crc32c.h - CRC-32C (Castagnoli) of byte ranges -----------*- C++ -*-===//
//
// The checksum a checkpoint stores per tensor (iSCSI, ext4 and gRPC use the
// same one). A small table-driven implementation (slicing by 8, a few GB/s)
// rather than llvm/Support's: the runtime does not link LLVM (it runs where
// only the runtime is installed), and LLVM ships CRC-32 (zlib's polynomial)
// but not CRC-32C.
//
//   uint32_t crc = crc32c(data, size);            // one range
//   uint32_t crc = crc32c(more, n, crc);           // continue over the next
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CHECKPOINT_CRC32C_H
#define PARTITION_RUNTIME_CHECKPOINT_CRC32C_H

#include <cstddef>
#include <cstdint>

namespace partition::runtime::checkpoint {

/// CRC-32C of `size` bytes at `data`, continuing from `crc` (the CRC of the
/// bytes before; 0 to start). crc32c("123456789", 9) == 0xE3069283.
uint32_t crc32c(const void *data, size_t size, uint32_t crc = 0);

} // namespace partition::runtime::checkpoint

#endif // PARTITION_RUNTIME_CHECKPOINT_CRC32C_H
