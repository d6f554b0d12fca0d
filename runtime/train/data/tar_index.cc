#include "runtime/train/data/tar_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/base/atomic_file.h"
#include "runtime/base/status.h"
#include "runtime/train/data/image_decode.h"
#include "runtime/train/data/image_source.h"

namespace hptrain::train {
namespace {

constexpr int64_t kBlock = 512;
constexpr const char* kIndexMagic = "hptrain-wds-index";
constexpr int kIndexVersion = 1;

// A tar numeric field: octal text (NUL/space terminated), or GNU base-256 when the high bit of
// its first byte is set.
bool ParseNumber(const uint8_t* field, int length, int64_t* value) {
  if ((field[0] & 0x80) != 0) {
    int64_t v = field[0] & 0x3f;
    for (int i = 1; i < length; ++i) {
      if (v > (INT64_MAX >> 8)) return false;
      v = (v << 8) | field[i];
    }
    *value = v;
    return true;
  }
  int64_t v = 0;
  int i = 0;
  while (i < length && field[i] == ' ') ++i;
  bool digits = false;
  for (; i < length && field[i] >= '0' && field[i] <= '7'; ++i) {
    if (v > (INT64_MAX >> 3)) return false;
    v = v * 8 + (field[i] - '0');
    digits = true;
  }
  if (i < length && field[i] != 0 && field[i] != ' ') return false;
  *value = v;
  return digits;
}

std::string CString(const uint8_t* field, size_t length) {
  const auto* begin = reinterpret_cast<const char*>(field);
  return std::string(begin, strnlen(begin, length));
}

// pax records: "LEN key=value\n" ...; returns path and size where given.
void ParsePax(const std::string& data, std::string* path, int64_t* size) {
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t space = data.find(' ', pos);
    if (space == std::string::npos) return;
    int64_t length = 0;
    if (!absl::SimpleAtoi(data.substr(pos, space - pos), &length) || length <= 0 ||
        pos + static_cast<size_t>(length) > data.size()) {
      return;
    }
    const std::string record = data.substr(space + 1, pos + length - space - 2);
    const size_t eq = record.find('=');
    if (eq != std::string::npos) {
      const std::string key = record.substr(0, eq);
      const std::string value = record.substr(eq + 1);
      if (key == "path") *path = value;
      if (key == "size") absl::SimpleAtoi(value, size);
    }
    pos += static_cast<size_t>(length);
  }
}

// Key and extension of a member name (WebDataset's base_plus_ext).
bool SplitKey(const std::string& name, std::string* key, std::string* ext) {
  const size_t slash = name.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = name.find('.', base);
  if (dot == std::string::npos || dot == base) return false;
  *key = name.substr(0, dot);
  *ext = name.substr(dot + 1);
  std::transform(ext->begin(), ext->end(), ext->begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return true;
}

bool IsImageExt(const std::string& ext) { return ext == "jpg" || ext == "jpeg" || ext == "png"; }

struct ShardStat {
  int64_t size = 0;
  int64_t mtime_ns = 0;
};

absl::StatusOr<ShardStat> StatShard(const std::string& shard) {
  struct stat st;
  if (stat(shard.c_str(), &st) != 0) return HPTRAIN_ERRNO(shard);
  return ShardStat{static_cast<int64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

absl::StatusOr<ShardIndex> BuildIndex(const std::string& shard) {
  HPTRAIN_ASSIGN_OR_RETURN(std::vector<TarMember> members, ListTarMembers(shard));
  ShardIndex index;
  index.shard = shard;
  size_t i = 0;
  while (i < members.size()) {
    std::string key, ext;
    if (!SplitKey(members[i].name, &key, &ext)) {
      ++i;
      continue;
    }
    const TarMember* image = nullptr;
    const TarMember* cls = nullptr;
    for (; i < members.size(); ++i) {
      std::string k, e;
      if (!SplitKey(members[i].name, &k, &e) || k != key) break;
      if (IsImageExt(e) && image == nullptr) image = &members[i];
      if (e == "cls" && cls == nullptr) cls = &members[i];
    }
    if (cls == nullptr) {
      return absl::DataLossError(absl::StrCat(shard, ": sample ", key, ": no .cls member"));
    }
    if (image == nullptr) {
      return absl::DataLossError(
          absl::StrCat(shard, ": sample ", key, ": no image member (.jpg, .jpeg or .png)"));
    }
    WdsSample sample;
    sample.image_member = image->name;
    sample.image_offset = image->offset;
    sample.image_size = image->size;
    HPTRAIN_ASSIGN_OR_RETURN(std::string text,
                             internal::ReadFileRange(shard, cls->offset, std::min<int64_t>(
                                                                              cls->size, 64)));
    const std::string trimmed(absl::StripAsciiWhitespace(text));
    if (!absl::SimpleAtoi(trimmed, &sample.label) || sample.label < 0) {
      return absl::DataLossError(absl::StrCat(shard, ": sample ", key, ": ", cls->name,
                                              " is not a class number >= 0: \"", trimmed, "\""));
    }
    auto info = internal::ReadImageInfoAt(shard, image->offset, image->size);
    if (info.ok()) {
      sample.height = info->height;
      sample.width = info->width;
      sample.channels = info->channels;
    }
    index.samples.push_back(std::move(sample));
  }
  return index;
}

std::string FormatIndex(const ShardIndex& index, const ShardStat& st) {
  std::string out = absl::StrCat(kIndexMagic, " ", kIndexVersion, " ", st.size, " ", st.mtime_ns,
                                 "\n");
  for (const WdsSample& s : index.samples) {
    absl::StrAppend(&out, s.image_offset, " ", s.image_size, " ", s.label, " ", s.height, " ",
                    s.width, " ", s.channels, " ", s.image_member, "\n");
  }
  return out;
}

// The index in `text` if it is well formed and describes a shard of `st`; nullopt otherwise.
bool ParseIndex(const std::string& text, const ShardStat& st, ShardIndex* index) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty()) return false;
  std::vector<std::string> head = absl::StrSplit(lines[0], ' ');
  int64_t size = -1, mtime = -1;
  if (head.size() != 4 || head[0] != kIndexMagic || head[1] != std::to_string(kIndexVersion) ||
      !absl::SimpleAtoi(head[2], &size) || !absl::SimpleAtoi(head[3], &mtime) ||
      size != st.size || mtime != st.mtime_ns) {
    return false;
  }
  for (size_t l = 1; l < lines.size(); ++l) {
    std::vector<std::string> f = absl::StrSplit(lines[l], absl::MaxSplits(' ', 6));
    WdsSample s;
    if (f.size() != 7 || !absl::SimpleAtoi(f[0], &s.image_offset) ||
        !absl::SimpleAtoi(f[1], &s.image_size) || !absl::SimpleAtoi(f[2], &s.label) ||
        !absl::SimpleAtoi(f[3], &s.height) || !absl::SimpleAtoi(f[4], &s.width) ||
        !absl::SimpleAtoi(f[5], &s.channels) || s.image_offset < 0 || s.image_size < 0 ||
        s.image_offset + s.image_size > st.size) {
      return false;
    }
    s.image_member = f[6];
    index->samples.push_back(std::move(s));
  }
  return true;
}

}  // namespace

std::string WdsSample::key() const {
  std::string key, ext;
  return SplitKey(image_member, &key, &ext) ? key : image_member;
}

std::string ShardIndexPath(const std::string& shard) { return shard + ".idx"; }

absl::StatusOr<std::vector<TarMember>> ListTarMembers(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return HPTRAIN_ERRNO(path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status s = HPTRAIN_ERRNO(path);
    close(fd);
    return s;
  }
  const int64_t file_size = st.st_size;
  std::vector<TarMember> members;
  std::string long_name;   // from a GNU 'L' member, for the next header
  std::string pax_path;    // from a pax 'x' member, for the next header
  int64_t pax_size = -1;
  absl::Status status;
  int64_t offset = 0;
  uint8_t h[kBlock];
  while (offset + kBlock <= file_size) {
    if (pread(fd, h, kBlock, offset) != kBlock) {
      status = HPTRAIN_ERRNO(path);
      break;
    }
    if (std::all_of(h, h + kBlock, [](uint8_t b) { return b == 0; })) break;  // end of archive
    int64_t checksum = 0;
    int64_t sum = 0;
    for (int i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
    int64_t size = 0;
    if (!ParseNumber(h + 148, 8, &checksum) || checksum != sum || !ParseNumber(h + 124, 12, &size)) {
      status = absl::DataLossError(
          absl::StrCat(path, ": corrupt tar header at offset ", offset, " (not a tar file?)"));
      break;
    }
    const char type = static_cast<char>(h[156]);
    if (pax_size >= 0 && (type == '0' || type == '\0')) size = pax_size;
    const int64_t data = offset + kBlock;
    if (size < 0 || data + size > file_size) {
      status = absl::DataLossError(absl::StrCat(path, ": truncated tar: member at offset ", offset,
                                                " needs ", size, " bytes, the file has ",
                                                file_size - data));
      break;
    }
    if (type == 'L' || type == 'x') {
      auto text = internal::ReadFileRange(path, data, size);
      if (!text.ok()) {
        status = text.status();
        break;
      }
      if (type == 'L') {
        long_name = CString(reinterpret_cast<const uint8_t*>(text->data()), text->size());
      } else {
        ParsePax(*text, &pax_path, &pax_size);
      }
    } else if (type == '0' || type == '\0' || type == '7') {
      std::string name = CString(h, 100);
      if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345] != 0) {
        name = CString(h + 345, 155) + "/" + name;
      }
      if (!long_name.empty()) name = long_name;
      if (!pax_path.empty()) name = pax_path;
      members.push_back(TarMember{name, data, size});
      long_name.clear();
      pax_path.clear();
      pax_size = -1;
    } else if (type != 'g') {  // directories, links, devices: not members; a global pax: ignored
      long_name.clear();
      pax_path.clear();
      pax_size = -1;
    }
    offset = data + (size + kBlock - 1) / kBlock * kBlock;
  }
  close(fd);
  if (!status.ok()) return status;
  return members;
}

absl::StatusOr<ShardIndex> LoadShardIndex(const std::string& shard) {
  // One builder at a time in this process; the cache spares a second open (the test split
  // looks at the training shards' classes) from reading the index file again.
  static std::mutex* const mu = new std::mutex;
  static auto* const cache = new std::map<std::string, std::pair<ShardStat, ShardIndex>>;
  std::lock_guard<std::mutex> lock(*mu);
  HPTRAIN_ASSIGN_OR_RETURN(const ShardStat st, StatShard(shard));
  auto cached = cache->find(shard);
  if (cached != cache->end() && cached->second.first.size == st.size &&
      cached->second.first.mtime_ns == st.mtime_ns) {
    return cached->second.second;
  }
  ShardIndex index;
  index.shard = shard;
  auto text = ReadFile(ShardIndexPath(shard));
  if (text.ok() && ParseIndex(*text, st, &index)) {
    index.from_file = true;
  } else {
    HPTRAIN_ASSIGN_OR_RETURN(index, BuildIndex(shard));
    bool writable = true;
    for (const WdsSample& s : index.samples) {
      if (s.image_member.find('\n') != std::string::npos) writable = false;
    }
    // A read-only directory keeps the index in memory: the error is not worth reporting.
    if (writable) (void)WriteFileAtomically(ShardIndexPath(shard), FormatIndex(index, st));
  }
  (*cache)[shard] = {st, index};
  return index;
}

}  // namespace hptrain::train
