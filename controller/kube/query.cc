#include "controller/kube/query.h"

#include "absl/strings/str_cat.h"

namespace hptrain::kube {

std::string EncodeQueryValue(absl::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (keep) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

Query& Query::Add(absl::string_view key, absl::string_view value) {
  params_.emplace_back(std::string(key), std::string(value));
  return *this;
}

Query& Query::Add(absl::string_view key, int64_t value) { return Add(key, absl::StrCat(value)); }

Query& Query::AddIfSet(absl::string_view key, absl::string_view value) {
  if (!value.empty()) Add(key, value);
  return *this;
}

std::string Query::Encoded() const {
  std::string out;
  for (const auto& [key, value] : params_) {
    absl::StrAppend(&out, out.empty() ? "?" : "&", EncodeQueryValue(key), "=",
                    EncodeQueryValue(value));
  }
  return out;
}

}  // namespace hptrain::kube
