// Writes .npy files byte for byte as numpy.save does (format 1.0, header padded with spaces to a
// multiple of 64 bytes and ended by '\n'), for tests that make npy data sets.
#ifndef HPTRAIN_TESTS_RUNTIME_TRAIN_DATA_NPY_WRITER_H_
#define HPTRAIN_TESTS_RUNTIME_TRAIN_DATA_NPY_WRITER_H_

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace hptrain::testing {

// numpy's repr of a shape tuple: "(3,)", "(2, 4)", "()".
inline std::string NpyShape(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// The header of a .npy file: magic, version (major.0), header length, the dict, padding.
inline std::string NpyHeader(const std::string& descr, const std::vector<int64_t>& shape,
                             int major = 1, bool fortran_order = false) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " +
                     (fortran_order ? "True" : "False") + ", 'shape': " + NpyShape(shape) + ", }";
  const size_t prefix = major == 1 ? 10 : 12;
  size_t total = prefix + dict.size() + 1;
  const size_t padded = (total + 63) / 64 * 64;
  dict += std::string(padded - total, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t length = static_cast<uint32_t>(dict.size());
  out += static_cast<char>(length & 0xff);
  out += static_cast<char>((length >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((length >> 16) & 0xff);
    out += static_cast<char>((length >> 24) & 0xff);
  }
  return out + dict;
}

// Header plus `bytes` bytes of data at `data`.
inline bool WriteNpy(const std::string& path, const std::string& descr,
                     const std::vector<int64_t>& shape, const void* data, size_t bytes,
                     int major = 1) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string header = NpyHeader(descr, shape, major);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  return out.good();
}

template <typename T>
bool WriteNpy(const std::string& path, const std::string& descr,
              const std::vector<int64_t>& shape, const std::vector<T>& values, int major = 1) {
  return WriteNpy(path, descr, shape, values.data(), values.size() * sizeof(T), major);
}

}  // namespace hptrain::testing

#endif  // HPTRAIN_TESTS_RUNTIME_TRAIN_DATA_NPY_WRITER_H_
