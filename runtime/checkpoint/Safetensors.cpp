//===- Safetensors.cpp - read and write the safetensors format ------------===//

#include "runtime/checkpoint/Safetensors.h"

#include "runtime/checkpoint/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this library copies it as is"
#endif

namespace partition::runtime::checkpoint {

namespace {

using Json = nlohmann::json;

/// The reference implementation refuses headers over 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeEntry {
  DType dtype;
  const char *name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::BOOL, "BOOL", 1},       {DType::U8, "U8", 1},
    {DType::I8, "I8", 1},           {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E8M0, "F8_E8M0", 1},
    {DType::I16, "I16", 2},         {DType::U16, "U16", 2},
    {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},
    {DType::I32, "I32", 4},         {DType::U32, "U32", 4},
    {DType::F32, "F32", 4},         {DType::C64, "C64", 8},
    {DType::F64, "F64", 8},         {DType::I64, "I64", 8},
    {DType::U64, "U64", 8},
};

const DTypeEntry &entryOf(DType dtype) {
  for (const DTypeEntry &entry : kDTypes)
    if (entry.dtype == dtype)
      return entry;
  throw CheckpointError("invalid DType value " +
                        std::to_string(static_cast<int>(dtype)) +
                        "; this is a bug in the caller");
}

std::string knownDTypes() {
  std::string list;
  for (const DTypeEntry &entry : kDTypes)
    list += (list.empty() ? "" : ", ") + std::string(entry.name);
  return list;
}

/// `text` as a JSON string literal: quoted, control characters escaped,
/// invalid UTF-8 replaced; safe inside a one-line message.
std::string quote(const std::string &text) {
  return Json(text).dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool isValidUtf8(const std::string &text) {
  try {
    (void)Json(text).dump();
    return true;
  } catch (const Json::exception &) {
    return false;
  }
}

/// Printable ASCII only (nlohmann's messages may quote raw file bytes).
std::string printable(std::string text) {
  for (char &c : text)
    if (static_cast<unsigned char>(c) < 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f)
      c = '?';
  return text;
}

/// Elements of `shape`, or nothing on a negative dimension or overflow.
std::optional<uint64_t> elementCount(const Shape &shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    if (dim != 0 &&
        count > std::numeric_limits<uint64_t>::max() / uint64_t(dim))
      return std::nullopt;
    count *= uint64_t(dim);
  }
  return count;
}

std::optional<uint64_t> byteCount(DType dtype, const Shape &shape) {
  std::optional<uint64_t> count = elementCount(shape);
  uint64_t size = dtypeSize(dtype);
  if (!count || *count > std::numeric_limits<uint64_t>::max() / size)
    return std::nullopt;
  return *count * size;
}

std::string shapeText(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

[[noreturn]] void writeError(const std::string &path,
                             const std::string &problem) {
  throw CheckpointError("cannot write '" + path + "': " + problem +
                        "; nothing was written");
}

/// The header bytes, padded; validates the tensors.
std::string encodeHeader(const std::string &path,
                         const std::vector<TensorRef> &tensors,
                         const Metadata &metadata) {
  using OrderedJson = nlohmann::ordered_json;
  OrderedJson root = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson entries = OrderedJson::object();
    for (const auto &[key, value] : metadata) {
      if (!isValidUtf8(key) || !isValidUtf8(value))
        writeError(path, "metadata key " + quote(key) + " or its value " +
                             quote(value) + " is not valid UTF-8");
      entries[key] = value;
    }
    root["__metadata__"] = std::move(entries);
  }

  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorRef &tensor : tensors) {
    const std::string name = quote(tensor.name);
    if (tensor.name.empty())
      writeError(path, "a tensor has an empty name");
    if (tensor.name == "__metadata__")
      writeError(path, "\"__metadata__\" is reserved and cannot name a tensor");
    if (!isValidUtf8(tensor.name))
      writeError(path, "tensor name " + name + " is not valid UTF-8");
    if (!seen.insert(tensor.name).second)
      writeError(path, "tensor " + name + " is given twice");
    (void)entryOf(tensor.dtype);
    std::optional<uint64_t> bytes = byteCount(tensor.dtype, tensor.shape);
    if (!bytes)
      writeError(path, "tensor " + name + " has shape " +
                           shapeText(tensor.shape) +
                           ", which has a negative dimension or is too large");
    if (*bytes != tensor.bytes)
      writeError(path, "tensor " + name + " is " +
                           describe(tensor.dtype, tensor.shape) + " (" +
                           std::to_string(*bytes) + " bytes) but " +
                           std::to_string(tensor.bytes) + " bytes were given");
    if (tensor.bytes > 0 && !tensor.data)
      writeError(path, "tensor " + name + " has no data pointer");

    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = dtypeName(tensor.dtype);
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = OrderedJson::array({offset, offset + *bytes});
    root[tensor.name] = std::move(entry);
    offset += *bytes;
  }

  std::string header = root.dump();
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

} // namespace

size_t dtypeSize(DType dtype) { return entryOf(dtype).size; }

const char *dtypeName(DType dtype) { return entryOf(dtype).name; }

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeEntry &entry : kDTypes)
    if (name == entry.name)
      return entry.dtype;
  return std::nullopt;
}

std::string describe(DType dtype, const Shape &shape) {
  return std::string(dtypeName(dtype)) + shapeText(shape);
}

int64_t TensorInfo::elements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

void writeSafetensors(const std::string &path,
                      const std::vector<TensorRef> &tensors,
                      const Metadata &metadata) {
  std::string header = encodeHeader(path, tensors, metadata);
  unsigned char length[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(n >> (8 * i));

  AtomicFile file(path);
  file.write(length, sizeof(length));
  file.write(header.data(), header.size());
  for (const TensorRef &tensor : tensors)
    if (tensor.bytes > 0)
      file.write(tensor.data, tensor.bytes);
  file.commit();
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

namespace {

constexpr const char *kCorrupt =
    "the file is corrupt or not a safetensors file; restore it or use "
    "another checkpoint";
constexpr const char *kTruncated =
    "the file is truncated (an interrupted copy?); restore it or use "
    "another checkpoint";

/// Thrown from the JSON parser callback; turned into a CheckpointError.
struct HeaderShapeError {
  std::string problem;
};

struct Entry {
  std::string name;
  TensorInfo info;
};

[[noreturn]] void fail(const std::string &path, const std::string &problem,
                       const char *remedy) {
  throw CheckpointError(path + ": " + problem + "; " + remedy);
}

/// "a number", "an array", ...: for messages.
std::string aType(const Json &value) {
  switch (value.type()) {
  case Json::value_t::null:
    return "null";
  case Json::value_t::object:
    return "an object";
  case Json::value_t::array:
    return "an array";
  case Json::value_t::string:
    return "a string";
  case Json::value_t::boolean:
    return "a boolean";
  case Json::value_t::number_integer:
  case Json::value_t::number_unsigned:
  case Json::value_t::number_float:
    return "a number";
  default:
    return std::string("a ") + value.type_name();
  }
}

std::string dumpJson(const Json &value) {
  return printable(value.dump(-1, ' ', false, Json::error_handler_t::replace));
}

/// Fails unless `fd` (open on `path`) is a regular file; returns its size.
uint64_t regularFileSize(const std::string &path, int fd) {
  struct stat status;
  if (::fstat(fd, &status) != 0)
    fail(path, std::string("cannot stat: ") + std::strerror(errno),
         "check the file");
  if (S_ISDIR(status.st_mode))
    fail(path, "is a directory, not a safetensors file",
         "name the .safetensors file inside it");
  if (!S_ISREG(status.st_mode))
    fail(path, "is not a regular file", "name a .safetensors file");
  return static_cast<uint64_t>(status.st_size);
}

/// Fails unless a file of `fileSize` bytes can hold the 8-byte length.
void checkLengthFits(const std::string &path, uint64_t fileSize) {
  if (fileSize < 8)
    fail(path,
         "the file is " + std::to_string(fileSize) +
             " bytes, shorter than the 8-byte header length that starts a "
             "safetensors file",
         kTruncated);
}

/// Decodes the little-endian header length and checks it against the file
/// size and the format's limit.
uint64_t headerLength(const std::string &path,
                      const unsigned char (&lengthBytes)[8],
                      uint64_t fileSize) {
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(lengthBytes[i]) << (8 * i);
  if (headerBytes > fileSize - 8)
    fail(path,
         "the header length " + std::to_string(headerBytes) +
             " runs past the end of the file (" + std::to_string(fileSize) +
             " bytes)",
         headerBytes > kMaxHeaderBytes ? kCorrupt : kTruncated);
  if (headerBytes > kMaxHeaderBytes)
    fail(path,
         "the header length " + std::to_string(headerBytes) +
             " exceeds the format's limit of " +
             std::to_string(kMaxHeaderBytes) + " bytes",
         kCorrupt);
  return headerBytes;
}

/// Parses the header text into a JSON object, rejecting duplicate keys and
/// nesting deeper than the format has.
Json parseHeader(const std::string &path, const std::string &header) {
  // The reference requires the header to start with '{' exactly.
  if (header.empty() || header[0] != '{')
    fail(path, "the header is not a JSON object (it does not start with '{')",
         kCorrupt);
  Json root;
  try {
    // Reject duplicate keys (the parser would keep the last silently) and
    // nesting deeper than the format has.
    std::vector<std::set<std::string>> keys;
    auto callback = [&](int depth, Json::parse_event_t event, Json &parsed) {
      switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth > 8)
          throw HeaderShapeError{"the header nests JSON deeper than the "
                                 "format allows"};
        if (event == Json::parse_event_t::object_start)
          keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!keys.empty())
          keys.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!keys.empty() &&
            !keys.back().insert(parsed.get<std::string>()).second)
          throw HeaderShapeError{
              "the header has key " + quote(parsed.get<std::string>()) +
              (depth == 1 ? " twice" : " twice in one entry")};
        break;
      default:
        break;
      }
      return true;
    };
    root = Json::parse(header, callback);
  } catch (const HeaderShapeError &error) {
    fail(path, error.problem, kCorrupt);
  } catch (const Json::exception &error) {
    fail(path, "the header is not valid JSON (" + printable(error.what()) + ")",
         kCorrupt);
  }
  if (!root.is_object())
    fail(path, "the header is not a JSON object", kCorrupt);
  return root;
}

/// Reads the "__metadata__" object of strings into `metadata`.
void readMetadata(const std::string &path, const Json &value,
                  Metadata &metadata) {
  if (!value.is_object())
    fail(path,
         "\"__metadata__\" is " + aType(value) + ", not an object of strings",
         kCorrupt);
  for (auto meta = value.begin(); meta != value.end(); ++meta) {
    if (!meta.value().is_string())
      fail(path,
           "metadata " + quote(meta.key()) + " is " + aType(meta.value()) +
               ", not a string",
           kCorrupt);
    metadata[meta.key()] = meta.value().get<std::string>();
  }
}

/// The "dtype" field of tensor `name` (quoted), which must be a known dtype.
DType entryDType(const std::string &path, const std::string &name,
                 const Json &dtype) {
  if (!dtype.is_string())
    fail(path,
         "tensor " + name + " has a dtype that is " + aType(dtype) +
             ", not a string",
         kCorrupt);
  std::optional<DType> parsedDType = parseDType(dtype.get<std::string>());
  if (!parsedDType)
    fail(path,
         "tensor " + name + " has dtype " + quote(dtype.get<std::string>()) +
             ", which this runtime does not read (known: " + knownDTypes() +
             ")",
         "convert the tensor to a supported dtype");
  return *parsedDType;
}

/// The "shape" field of tensor `name` (quoted): non-negative int64 dims.
Shape entryShape(const std::string &path, const std::string &name,
                 const Json &shape) {
  if (!shape.is_array())
    fail(path,
         "tensor " + name + " has a shape that is " + aType(shape) +
             ", not an array",
         kCorrupt);
  Shape dims;
  for (const Json &dim : shape) {
    if (!dim.is_number_unsigned() ||
        dim.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(path,
           "tensor " + name + " has shape " + dumpJson(dim) +
               " where a non-negative integer belongs: " + dumpJson(shape),
           kCorrupt);
    dims.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
  }
  return dims;
}

/// Sets `info`'s begin and end from the "data_offsets" field of tensor
/// `name` (quoted) and checks they span exactly its dtype and shape.
void readOffsets(const std::string &path, const std::string &name,
                 const Json &offsets, TensorInfo &info) {
  if (!offsets.is_array() || offsets.size() != 2 ||
      !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    fail(path,
         "tensor " + name + " has data_offsets " + dumpJson(offsets) +
             ", not [begin, end] as two non-negative integers",
         kCorrupt);
  info.begin = offsets[0].get<uint64_t>();
  info.end = offsets[1].get<uint64_t>();
  if (info.begin > info.end)
    fail(path,
         "tensor " + name + " has data_offsets " + dumpJson(offsets) +
             " that end before they begin",
         kCorrupt);
  std::optional<uint64_t> bytes = byteCount(info.dtype, info.shape);
  if (!bytes)
    fail(path,
         "tensor " + name + " has shape " + shapeText(info.shape) +
             ", too large to address",
         kCorrupt);
  if (*bytes != info.bytes())
    fail(path,
         "tensor " + name + " is " + describe(info.dtype, info.shape) + " (" +
             std::to_string(*bytes) + " bytes) but its data_offsets " +
             range(info.begin, info.end) + " span " +
             std::to_string(info.bytes()) + " bytes",
         kCorrupt);
}

/// One tensor's header entry `key`: `value`, checked field by field.
Entry parseEntry(const std::string &path, const std::string &key,
                 const Json &value) {
  const std::string name = quote(key);
  if (!value.is_object())
    fail(path,
         "tensor " + name + " is " + aType(value) +
             ", not an object with dtype, shape and data_offsets",
         kCorrupt);
  for (const char *field : {"dtype", "shape", "data_offsets"})
    if (!value.contains(field))
      fail(path, "tensor " + name + " has no \"" + field + "\"", kCorrupt);

  Entry entry;
  entry.name = key;
  entry.info.dtype = entryDType(path, name, value["dtype"]);
  entry.info.shape = entryShape(path, name, value["shape"]);
  readOffsets(path, name, value["data_offsets"], entry.info);
  return entry;
}

/// Sorts `entries` by offset and checks they tile the `dataBytes`-byte data
/// section exactly, as the reference checks.
void checkTiling(const std::string &path, std::vector<Entry> &entries,
                 uint64_t dataBytes) {
  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    return std::tie(a.info.begin, a.info.end, a.name) <
           std::tie(b.info.begin, b.info.end, b.name);
  });
  uint64_t covered = 0;
  const Entry *previous = nullptr;
  for (const Entry &entry : entries) {
    if (entry.info.begin < covered)
      fail(path,
           "tensor " + quote(entry.name) + " at " +
               range(entry.info.begin, entry.info.end) + " overlaps tensor " +
               quote(previous->name) + " at " +
               range(previous->info.begin, previous->info.end),
           kCorrupt);
    if (entry.info.begin > covered)
      fail(path,
           "bytes " + range(covered, entry.info.begin) +
               " of the data section belong to no tensor",
           kCorrupt);
    if (entry.info.end > dataBytes)
      fail(path,
           "the data section holds " + std::to_string(dataBytes) +
               " bytes but tensor " + quote(entry.name) + " lies at " +
               range(entry.info.begin, entry.info.end),
           kTruncated);
    if (!previous || entry.info.bytes() > 0)
      previous = &entry;
    covered = entry.info.end;
  }
  if (covered != dataBytes)
    fail(path,
         "the data section holds " + std::to_string(dataBytes) +
             " bytes but the tensors cover only " + std::to_string(covered),
         kCorrupt);
}

} // namespace

Safetensors::Safetensors(Safetensors &&other) noexcept {
  *this = std::move(other);
}

Safetensors &Safetensors::operator=(Safetensors &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
    dataStart_ = other.dataStart_;
    names_ = std::move(other.names_);
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

Safetensors::~Safetensors() {
  if (fd_ >= 0)
    ::close(fd_);
}

Safetensors Safetensors::open(const std::string &path) {
  Safetensors file;
  file.path_ = path;

  file.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd_ < 0) {
    int error = errno;
    if (error == ENOENT)
      fail(path, "no such file",
           "check the path, or save a checkpoint there first");
    fail(path, std::string("cannot open: ") + std::strerror(error),
         "check the path and its permissions");
  }
  const uint64_t fileSize = regularFileSize(path, file.fd_);

  checkLengthFits(path, fileSize);
  unsigned char lengthBytes[8];
  file.preadExactly(0, lengthBytes, 8);
  const uint64_t headerBytes = headerLength(path, lengthBytes, fileSize);
  std::string header(headerBytes, '\0');
  file.preadExactly(8, header.data(), header.size());
  file.dataStart_ = 8 + headerBytes;
  const uint64_t dataBytes = fileSize - file.dataStart_;

  Json root = parseHeader(path, header);
  std::vector<Entry> entries;
  for (auto item = root.begin(); item != root.end(); ++item) {
    if (item.key() == "__metadata__")
      readMetadata(path, item.value(), file.metadata_);
    else
      entries.push_back(parseEntry(path, item.key(), item.value()));
  }
  checkTiling(path, entries, dataBytes);

  for (Entry &entry : entries) {
    file.names_.push_back(entry.name);
    file.tensors_.emplace(entry.name, std::move(entry.info));
  }
  return file;
}

bool Safetensors::contains(const std::string &name) const {
  return tensors_.count(name) != 0;
}

const TensorInfo &Safetensors::info(const std::string &name) const {
  auto it = tensors_.find(name);
  if (it != tensors_.end())
    return it->second;
  std::string some;
  for (size_t i = 0; i < names_.size() && i < 4; ++i)
    some += (i ? ", " : "") + quote(names_[i]);
  if (names_.size() > 4)
    some += ", ...";
  throw CheckpointError(
      path_ + ": no tensor " + quote(name) + " (the file holds " +
      std::to_string(names_.size()) + " tensors" +
      (some.empty() ? "" : ": " + some) +
      "); the checkpoint was written for another model, or the name is wrong");
}

const std::string &Safetensors::metadata(const std::string &key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end())
    throw CheckpointError(path_ + ": no metadata " + quote(key) +
                          "; the file was not written by this runtime's "
                          "checkpoint code, or by an older version of it");
  return it->second;
}

void Safetensors::read(const std::string &name, DType dtype, const Shape &shape,
                       void *dest, size_t bytes) const {
  const TensorInfo &tensor = info(name);
  if (tensor.dtype != dtype || tensor.shape != shape)
    throw CheckpointError(path_ + ": tensor " + quote(name) + " is " +
                          describe(tensor.dtype, tensor.shape) +
                          " but the caller expects " + describe(dtype, shape) +
                          "; the checkpoint belongs to another model "
                          "configuration");
  readRaw(name, dest, bytes);
}

void Safetensors::readRaw(const std::string &name, void *dest,
                          size_t bytes) const {
  const TensorInfo &tensor = info(name);
  if (bytes != tensor.bytes())
    throw CheckpointError(path_ + ": tensor " + quote(name) + " is " +
                          describe(tensor.dtype, tensor.shape) + ", " +
                          std::to_string(tensor.bytes()) +
                          " bytes, but the destination holds " +
                          std::to_string(bytes) +
                          "; the caller's buffer does not match the "
                          "checkpoint");
  preadExactly(dataStart_ + tensor.begin, dest, bytes);
}

void Safetensors::readBytes(const std::string &name, uint64_t offset,
                            void *dest, size_t bytes) const {
  const TensorInfo &tensor = info(name);
  if (offset > tensor.bytes() || bytes > tensor.bytes() - offset)
    throw CheckpointError(path_ + ": bytes " + range(offset, offset + bytes) +
                          " lie outside tensor " + quote(name) + " (" +
                          describe(tensor.dtype, tensor.shape) + ", " +
                          std::to_string(tensor.bytes()) +
                          " bytes); the caller's slice is wrong");
  preadExactly(dataStart_ + tensor.begin + offset, dest, bytes);
}

void Safetensors::preadExactly(uint64_t fileOffset, void *dest,
                               size_t bytes) const {
  char *p = static_cast<char *>(dest);
  while (bytes > 0) {
    size_t chunk = bytes < (size_t(1) << 30) ? bytes : (size_t(1) << 30);
    ssize_t n = ::pread(fd_, p, chunk, static_cast<off_t>(fileOffset));
    if (n < 0) {
      int error = errno;
      if (error == EINTR)
        continue;
      throw CheckpointError(path_ + ": read failed: " + std::strerror(error) +
                            "; check the disk and the file");
    }
    if (n == 0)
      throw CheckpointError(path_ +
                            ": the file ended early; it was truncated or "
                            "replaced while open, reopen it");
    p += n;
    fileOffset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

} // namespace partition::runtime::checkpoint
