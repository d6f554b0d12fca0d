// File helpers for the tests of MP²'s two files (the snapshot dataset and the predictor): a
// scratch directory, whole-file reads and writes that bypass the library (so that a test can
// plant a cut or damaged file), the CRC-32 that both formats end with, and the check that a
// refusal is one line naming the file.
#ifndef HPTRAIN_TESTS_RUNTIME_PS_MP2_TEST_FILES_H_
#define HPTRAIN_TESTS_RUNTIME_PS_MP2_TEST_FILES_H_

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace hptrain::ps::mp2::testing {

// A new, empty directory under gtest's temporary directory, named <prefix>XXXXXX; the caller
// removes it.
inline std::string MakeTempDir(const std::string& prefix) {
  std::string pattern = ::testing::TempDir() + "/" + prefix + "XXXXXX";
  const char* dir = mkdtemp(pattern.data());
  EXPECT_NE(dir, nullptr);
  return pattern;
}

// The whole file at `path`; "" when it cannot be read.
inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Replaces the file at `path` with `bytes` (not atomically: a test wants exactly these bytes).
inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// The CRC-32 (zlib) of the first `n` bytes of `bytes`, as the files store it; computed here
// rather than by the library so that the tests check the format, not the code against itself.
inline uint32_t Crc32(const std::string& bytes, size_t n) {
  return static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data()), n));
}

// Appends `value` as the files store their u32 fields (little-endian, the only byte order the
// library builds for).
inline void PutU32(std::string& out, uint32_t value) {
  out.append(reinterpret_cast<const char*>(&value), 4);
}

// Every refusal is one line that names the file.
inline void ExpectOneLineNamingFile(const absl::Status& status, const std::string& path) {
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(path));
  EXPECT_THAT(std::string(status.message()), ::testing::Not(::testing::HasSubstr("\n")));
}

}  // namespace hptrain::ps::mp2::testing

#endif  // HPTRAIN_TESTS_RUNTIME_PS_MP2_TEST_FILES_H_
