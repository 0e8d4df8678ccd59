//===- Npz.cpp - NumPy .npz archives of a few arrays ----------------------===//

#include "runtime/train/Npz.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace partition::runtime {
namespace {

/// The zip format's CRC-32 (IEEE 802.3, reflected 0xEDB88320); the
/// checkpoints' CRC-32C is another polynomial.
uint32_t crc32(const std::string &bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> entries{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      entries[i] = c;
    }
    return entries;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes)
    crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

void put16(std::string &out, uint32_t value) {
  out.push_back(char(value & 0xFF));
  out.push_back(char(value >> 8 & 0xFF));
}
void put32(std::string &out, uint32_t value) {
  put16(out, value & 0xFFFF);
  put16(out, value >> 16);
}

/// The part of a zip entry's header shared by the local header and the
/// central directory: version needed, flags, method (stored), time and
/// date (1980-01-01 00:00), CRC, sizes, name length, extra length.
void putEntryFields(std::string &out, uint32_t crc, uint32_t size,
                    const std::string &name) {
  put16(out, 20);
  put16(out, 0);
  put16(out, 0);
  put16(out, 0);
  put16(out, 0x21);
  put32(out, crc);
  put32(out, size);
  put32(out, size);
  put16(out, uint32_t(name.size()));
  put16(out, 0);
}

} // namespace

std::string npyBytes(const NpyArray &array) {
  std::string shape = "(";
  int64_t elements = 1;
  for (int64_t dim : array.shape) {
    shape += std::to_string(dim) + ", ";
    elements *= dim;
  }
  if (array.shape.size() > 1)
    shape.resize(shape.size() - 1); // (2, 3) but (4,)
  shape += ")";
  std::string header = std::string("{'descr': '") +
                       (array.type == NpyArray::Type::F32 ? "<f4" : "<i4") +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Padded with blanks to a multiple of 64 bytes, preamble included, and
  // ended by a newline, as numpy writes it.
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out.push_back(1);
  out.push_back(0);
  put16(out, uint32_t(header.size()));
  out += header;
  // Both element types are 4 bytes, written little-endian.
  const auto *bytes = static_cast<const unsigned char *>(array.data);
  size_t size = size_t(elements) * 4;
  out.reserve(out.size() + size);
  const uint32_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  if (first == 1) {
    out.append(reinterpret_cast<const char *>(bytes), size);
  } else {
    for (size_t i = 0; i < size; i += 4)
      for (int b = 3; b >= 0; --b)
        out.push_back(char(bytes[i + b]));
  }
  return out;
}

void writeNpz(const std::string &path, const std::vector<NpyArray> &arrays) {
  std::string central;
  uint64_t offset = 0;
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    throw std::runtime_error("cannot write '" + path + "': " +
                             std::strerror(errno) +
                             "; check that its directory exists and is "
                             "writable");
  auto write = [&](const std::string &bytes) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
      std::fclose(file);
      throw std::runtime_error("cannot write '" + path + "': " +
                               std::strerror(errno) + "; check the disk space");
    }
    offset += bytes.size();
  };
  for (const NpyArray &array : arrays) {
    std::string name = array.name + ".npy";
    std::string data = npyBytes(array);
    if (data.size() >= std::numeric_limits<uint32_t>::max() ||
        offset >= std::numeric_limits<uint32_t>::max()) {
      std::fclose(file);
      throw std::runtime_error(
          "cannot write '" + path + "': the array '" + array.name + "' (" +
          std::to_string(data.size()) +
          " bytes) does not fit a zip archive without zip64; use a smaller "
          "batch or sequence length");
    }
    uint32_t crc = crc32(data);
    std::string local;
    put32(local, 0x04034b50);
    putEntryFields(local, crc, uint32_t(data.size()), name);
    local += name;
    put32(central, 0x02014b50);
    put16(central, 20); // made by: version 2.0
    putEntryFields(central, crc, uint32_t(data.size()), name);
    put16(central, 0); // comment length
    put16(central, 0); // disk
    put16(central, 0); // internal attributes
    put32(central, 0); // external attributes
    put32(central, uint32_t(offset));
    central += name;
    write(local);
    write(data);
  }
  std::string end;
  put32(end, 0x06054b50);
  put16(end, 0);
  put16(end, 0);
  put16(end, uint32_t(arrays.size()));
  put16(end, uint32_t(arrays.size()));
  put32(end, uint32_t(central.size()));
  put32(end, uint32_t(offset));
  put16(end, 0);
  write(central);
  write(end);
  if (std::fclose(file) != 0)
    throw std::runtime_error("cannot write '" + path + "': " +
                             std::strerror(errno) + "; check the disk space");
}

} // namespace partition::runtime
