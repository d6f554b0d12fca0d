#include "runtime/job/elastic_control.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/base/status.h"

namespace hptrain::job {
namespace {

constexpr const char* kUsage = "add, remove SLOT [at STEP], kill SLOT";

absl::StatusOr<int> ParseSlot(absl::string_view word, int slots) {
  int slot = -1;
  if (!absl::SimpleAtoi(word, &slot)) {
    return absl::InvalidArgumentError(absl::StrCat("SLOT must be an integer, got '", word, "'"));
  }
  if (slot < 0 || slot >= slots) {
    return absl::InvalidArgumentError(
        absl::StrCat("slot ", slot, " is not in 0..", slots - 1, " (spec.elastic.maxReplicas)"));
  }
  return slot;
}

}  // namespace

absl::StatusOr<std::optional<ControlCommand>> ParseControlLine(absl::string_view line, int slots) {
  const absl::string_view text = absl::StripAsciiWhitespace(line);
  if (text.empty() || text.front() == '#') return std::nullopt;
  std::vector<absl::string_view> words =
      absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  ControlCommand command;
  if (words[0] == "add") {
    if (words.size() != 1) return absl::InvalidArgumentError("expected: add (no arguments)");
    command.kind = ControlCommand::Kind::kAdd;
    return command;
  }
  if (words[0] == "kill") {
    if (words.size() != 2) return absl::InvalidArgumentError("expected: kill SLOT");
    command.kind = ControlCommand::Kind::kKill;
    HPTRAIN_ASSIGN_OR_RETURN(command.slot, ParseSlot(words[1], slots));
    return command;
  }
  if (words[0] == "remove") {
    if (words.size() != 2 && !(words.size() == 4 && words[2] == "at")) {
      return absl::InvalidArgumentError("expected: remove SLOT [at STEP]");
    }
    command.kind = ControlCommand::Kind::kRemove;
    HPTRAIN_ASSIGN_OR_RETURN(command.slot, ParseSlot(words[1], slots));
    if (words.size() == 4 &&
        (!absl::SimpleAtoi(words[3], &command.at_step) || command.at_step < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("STEP must be a positive integer, got '", words[3], "'"));
    }
    return command;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown command '", words[0], "' (", kUsage, ")"));
}

absl::StatusOr<ControlFile> ControlFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return HPTRAIN_ERRNO(absl::StrCat("control file ", path));
  struct stat st;
  const int stat_result = ::fstat(fd, &st);
  const int stat_errno = errno;
  ::close(fd);
  if (stat_result != 0) {
    return ErrnoStatus(stat_errno, absl::StrCat("control file ", path), __FILE__, __LINE__);
  }
  return ControlFile(path, static_cast<int64_t>(st.st_size));
}

std::vector<std::string> ControlFile::ReadNewLines() {
  std::vector<std::string> lines;
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return lines;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return lines;
  }
  if (st.st_size < offset_) offset_ = 0;  // truncated or replaced: read it from the start
  std::string text;
  char buffer[4096];
  for (int64_t at = offset_;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof(buffer), at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
    at += n;
  }
  ::close(fd);
  const size_t end = text.rfind('\n');
  if (end == std::string::npos) return lines;  // no complete line yet
  offset_ += static_cast<int64_t>(end + 1);
  for (absl::string_view line : absl::StrSplit(absl::string_view(text).substr(0, end), '\n')) {
    lines.emplace_back(absl::StripSuffix(line, "\r"));
  }
  return lines;
}

std::optional<int> LowestFreeSlot(const std::vector<int>& busy, int slots) {
  for (int slot = 0; slot < slots; ++slot) {
    if (std::find(busy.begin(), busy.end(), slot) == busy.end()) return slot;
  }
  return std::nullopt;
}

std::string LostReason(const ChildStatus& child) {
  if (child.signaled) return absl::StrCat("killed by signal ", child.term_signal);
  return absl::StrCat("exit ", child.exit_code);
}

std::optional<int> WorkerSlot(const std::string& child_name) {
  absl::string_view name = child_name;
  int slot = -1;
  if (!absl::ConsumePrefix(&name, "worker-") || !absl::SimpleAtoi(name, &slot) || slot < 0) {
    return std::nullopt;
  }
  return slot;
}

std::vector<int> CurrentMembers(const std::vector<int>& members, int changes, int replicas) {
  if (!members.empty() || changes > 0) return members;
  std::vector<int> first;
  for (int slot = 0; slot < replicas; ++slot) first.push_back(slot);
  return first;
}

bool MembersFinished(const std::vector<int>& members, const std::vector<int>& finished,
                     int done_reports) {
  if (members.empty() || done_reports < static_cast<int>(members.size())) return false;
  return std::all_of(members.begin(), members.end(), [&](int slot) {
    return std::find(finished.begin(), finished.end(), slot) != finished.end();
  });
}

double ShortageTimer::Update(int members, double now_seconds) {
  if (members >= min_members_) {
    below_since_.reset();
    return 0.0;
  }
  if (!below_since_) below_since_ = now_seconds;
  return now_seconds - *below_since_;
}

}  // namespace hptrain::job
