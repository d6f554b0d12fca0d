#include "runtime/train/data/tar_index.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/integration/hptrain_process.h"
#include "tests/runtime/train/data/image_test_util.h"

namespace hptrain::train {
namespace {

using hptrain::testing::TempDir;
using testing::PatternImage;
using testing::Png;
using testing::Tar;
using testing::WriteFile;

TEST(TarIndex, ListsMembersWithOffsetsAndLongNames) {
  TempDir dir;
  const std::string long_name = std::string(120, 'd') + "/0001.cls";
  const std::string tar = Tar({{"a.txt", "hello"}, {long_name, "7"}, {"b.bin", std::string(600, 'x')}});
  const std::string path = dir.path() + "/x.tar";
  WriteFile(path, tar);
  auto members = ListTarMembers(path);
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 3u);
  EXPECT_EQ((*members)[0].name, "a.txt");
  EXPECT_EQ((*members)[1].name, long_name);
  EXPECT_EQ((*members)[2].name, "b.bin");
  for (const TarMember& m : *members) {
    EXPECT_EQ(m.offset % 512, 0);
    EXPECT_LE(m.offset + m.size, static_cast<int64_t>(tar.size()));
  }
  EXPECT_EQ(tar.substr((*members)[0].offset, (*members)[0].size), "hello");
  EXPECT_EQ(tar.substr((*members)[1].offset, (*members)[1].size), "7");
  EXPECT_EQ((*members)[2].size, 600);
}

TEST(TarIndex, TruncatedAndCorruptTarsAreDataLoss) {
  TempDir dir;
  const std::string tar = Tar({{"a.bin", std::string(2000, 'x')}});
  WriteFile(dir.path() + "/short.tar", tar.substr(0, 1024));
  auto members = ListTarMembers(dir.path() + "/short.tar");
  ASSERT_FALSE(members.ok());
  EXPECT_EQ(members.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(members.status().message().find("short.tar: truncated tar"), std::string::npos)
      << members.status();

  std::string bad = tar;
  bad[10] ^= 1;  // the checksum no longer matches
  WriteFile(dir.path() + "/bad.tar", bad);
  members = ListTarMembers(dir.path() + "/bad.tar");
  ASSERT_FALSE(members.ok());
  EXPECT_NE(members.status().message().find("bad.tar: corrupt tar header at offset 0"),
            std::string::npos)
      << members.status();
}

std::string Shard(int first, int count) {
  std::vector<std::pair<std::string, std::string>> members;
  for (int i = first; i < first + count; ++i) {
    const std::string key = "s" + std::to_string(1000 + i);
    members.push_back({key + ".png", Png(PatternImage(4 + i % 3, 5, 1, i), 4 + i % 3, 5, 1)});
    members.push_back({key + ".cls", std::to_string(i % 4) + "\n"});
    members.push_back({key + ".json", "{}"});
  }
  return Tar(members);
}

TEST(TarIndex, GroupsSamplesAndWritesAnIndexThatIsReused) {
  TempDir dir;
  const std::string shard = dir.path() + "/train-000.tar";
  WriteFile(shard, Shard(0, 5));
  auto index = LoadShardIndex(shard);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_FALSE(index->from_file);
  ASSERT_EQ(index->samples.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const WdsSample& s = index->samples[i];
    EXPECT_EQ(s.key(), "s" + std::to_string(1000 + i));
    EXPECT_EQ(s.image_member, s.key() + ".png");
    EXPECT_EQ(s.label, i % 4);
    EXPECT_EQ(s.height, 4 + i % 3);
    EXPECT_EQ(s.width, 5);
    EXPECT_EQ(s.channels, 1);
  }
  ASSERT_TRUE(std::filesystem::exists(ShardIndexPath(shard)));
  const std::string text = hptrain::testing::ReadFile(ShardIndexPath(shard));
  EXPECT_EQ(text.rfind("hptrain-wds-index 1 ", 0), 0u) << text;

  // A new shard with the same name but other content: the index no longer matches and is rebuilt
  // (the size differs).
  WriteFile(shard, Shard(10, 3));
  index = LoadShardIndex(shard);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->samples.size(), 3u);
  EXPECT_EQ(index->samples[0].key(), "s1010");
}

TEST(TarIndex, AnIndexFileFromAnotherProcessIsRead) {
  TempDir dir;
  const std::string shard = dir.path() + "/train-000.tar";
  WriteFile(shard, Shard(0, 4));
  ASSERT_TRUE(LoadShardIndex(shard).ok());
  // Copy shard and index elsewhere with the shard's mtime: the copy's index is valid there too.
  const std::string other = dir.path() + "/copy";
  std::filesystem::create_directories(other);
  std::filesystem::copy_file(shard, other + "/train-000.tar");
  struct stat st;
  ASSERT_EQ(stat(shard.c_str(), &st), 0);
  std::string text = hptrain::testing::ReadFile(ShardIndexPath(shard));
  struct stat copy;
  ASSERT_EQ(stat((other + "/train-000.tar").c_str(), &copy), 0);
  const int64_t mtime = int64_t{copy.st_mtim.tv_sec} * 1000000000 + copy.st_mtim.tv_nsec;
  const size_t line = text.find('\n');
  text = "hptrain-wds-index 1 " + std::to_string(copy.st_size) + " " + std::to_string(mtime) +
         text.substr(line);
  WriteFile(other + "/train-000.tar.idx", text);
  auto index = LoadShardIndex(other + "/train-000.tar");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_TRUE(index->from_file);
  EXPECT_EQ(index->samples.size(), 4u);
}

TEST(TarIndex, AnIndexThatCannotBeWrittenIsKeptInMemory) {
  TempDir dir;
  const std::string shard = dir.path() + "/train-000.tar";
  WriteFile(shard, Shard(0, 2));
  // A directory where the index file would go: it can be neither read nor replaced (as in a
  // read-only directory, which root could still write to).
  std::filesystem::create_directories(ShardIndexPath(shard));
  auto index = LoadShardIndex(shard);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_FALSE(index->from_file);
  EXPECT_EQ(index->samples.size(), 2u);
  EXPECT_TRUE(std::filesystem::is_directory(ShardIndexPath(shard)));
}

TEST(TarIndex, MissingClsOrImageNamesShardAndKey) {
  TempDir dir;
  const std::string png = Png(PatternImage(4, 4, 1, 0), 4, 4, 1);
  WriteFile(dir.path() + "/a.tar", Tar({{"k1.png", png}, {"k1.cls", "1"}, {"k2.png", png}}));
  auto index = LoadShardIndex(dir.path() + "/a.tar");
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(index.status().message(), dir.path() + "/a.tar: sample k2: no .cls member");

  WriteFile(dir.path() + "/b.tar", Tar({{"k1.cls", "1"}}));
  index = LoadShardIndex(dir.path() + "/b.tar");
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().message(),
            dir.path() + "/b.tar: sample k1: no image member (.jpg, .jpeg or .png)");

  WriteFile(dir.path() + "/c.tar", Tar({{"k1.cls", "cat"}, {"k1.jpg", png}}));
  index = LoadShardIndex(dir.path() + "/c.tar");
  ASSERT_FALSE(index.ok());
  EXPECT_NE(index.status().message().find("c.tar: sample k1: k1.cls is not a class number"),
            std::string::npos)
      << index.status();
}

}  // namespace
}  // namespace hptrain::train
