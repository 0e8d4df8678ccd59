//===- Crc32c.cpp - CRC-32C (Castagnoli) of byte ranges -------------------===//

#include "runtime/checkpoint/Crc32c.h"

#include <array>
#include <cstring>

namespace partition::runtime::checkpoint {

namespace {

/// The reflected Castagnoli polynomial.
constexpr uint32_t kPolynomial = 0x82F63B78u;

/// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC of
/// byte b followed by k zero bytes, so that eight bytes are folded per step
/// ("slicing by 8").
using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables makeTables() {
  Tables tables{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (kPolynomial & (0u - (crc & 1u)));
    tables[0][byte] = crc;
  }
  for (uint32_t byte = 0; byte < 256; ++byte)
    for (size_t k = 1; k < 8; ++k)
      tables[k][byte] = (tables[k - 1][byte] >> 8) ^
                        tables[0][tables[k - 1][byte] & 0xffu];
  return tables;
}

const Tables &tables() {
  static const Tables instance = makeTables();
  return instance;
}

} // namespace

uint32_t crc32c(const void *data, size_t size, uint32_t crc) {
  const Tables &t = tables();
  const unsigned char *p = static_cast<const unsigned char *>(data);
  crc = ~crc;
  // The 8-byte loads are little-endian (Safetensors.cpp requires that host).
  while (size >= 8) {
    uint32_t low, high;
    std::memcpy(&low, p, 4);
    std::memcpy(&high, p + 4, 4);
    low ^= crc;
    crc = t[7][low & 0xffu] ^ t[6][(low >> 8) & 0xffu] ^
          t[5][(low >> 16) & 0xffu] ^ t[4][low >> 24] ^ t[3][high & 0xffu] ^
          t[2][(high >> 8) & 0xffu] ^ t[1][(high >> 16) & 0xffu] ^
          t[0][high >> 24];
    p += 8;
    size -= 8;
  }
  while (size-- > 0)
    crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xffu];
  return ~crc;
}

} // namespace partition::runtime::checkpoint
