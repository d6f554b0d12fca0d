// Tar shards as the webdataset format reads them: the members of a tar file, grouped into
// WebDataset samples, and the index that lets a reader seek to a sample's image by offset.
//
// Tar: 512-byte headers (POSIX ustar, with GNU long names ('L') and pax extended headers ('x')
// for names and sizes that do not fit), each followed by its data padded to 512 bytes; a zero
// block ends the archive. Only regular files count as members.
//
// WebDataset: a member's key is its path up to the first '.' of its file name and its extension
// what follows ("a/b/0001.cls" -> key "a/b/0001", extension "cls"); a sample is a run of
// consecutive members sharing a key. A sample needs one image (extension jpg, jpeg or png, any
// case; the first if several) and a `cls` member whose text is an integer class; other members
// are ignored.
//
// The index of SHARD lives in SHARD.idx (a text file, docs/data.md "webdataset"):
//   hptrain-wds-index 1 SHARD_BYTES SHARD_MTIME_NS
//   IMAGE_OFFSET IMAGE_BYTES LABEL HEIGHT WIDTH CHANNELS IMAGE_MEMBER_NAME     (one per sample)
// HEIGHT WIDTH CHANNELS are the image header's (0 0 0 when the header cannot be read: the sample
// fails when it is decoded). An index whose size or mtime differs from the shard's is rebuilt;
// one that cannot be written (a read-only directory) is kept in memory only.
//
// Thread-safety: the functions may be called from several threads; index building is serialized
// within the process, and several processes writing one index replace it atomically.
#ifndef HPTRAIN_RUNTIME_TRAIN_DATA_TAR_INDEX_H_
#define HPTRAIN_RUNTIME_TRAIN_DATA_TAR_INDEX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hptrain::train {

struct TarMember {
  std::string name;
  int64_t offset = 0;  // of the member's data in the file
  int64_t size = 0;
};

// The regular-file members of the tar file at `path`, in archive order. NotFound if it does not
// exist; DataLoss "PATH: ..." for a bad header checksum, a bad size field, or a member whose data
// runs past the end of the file.
absl::StatusOr<std::vector<TarMember>> ListTarMembers(const std::string& path);

struct WdsSample {
  std::string image_member;  // e.g. "0001.png"
  int64_t image_offset = 0;
  int64_t image_size = 0;
  int64_t label = 0;
  int height = 0, width = 0, channels = 0;  // 0: header unreadable
  // The sample's key: image_member up to the first '.' of its file name.
  std::string key() const;
};

struct ShardIndex {
  std::string shard;
  std::vector<WdsSample> samples;
  bool from_file = false;  // read from SHARD.idx rather than built now
};

// The samples of `shard`: from SHARD.idx when it matches the shard, else by reading the tar
// (headers, `cls` members and image headers) and writing SHARD.idx when the directory allows.
// ListTarMembers' errors; DataLoss "SHARD: sample KEY: no .cls member" / "no image member
// (.jpg, .jpeg or .png)" / "KEY.cls is not an integer class: TEXT".
absl::StatusOr<ShardIndex> LoadShardIndex(const std::string& shard);

// The path of `shard`'s index file: shard + ".idx".
std::string ShardIndexPath(const std::string& shard);

}  // namespace hptrain::train

#endif  // HPTRAIN_RUNTIME_TRAIN_DATA_TAR_INDEX_H_
