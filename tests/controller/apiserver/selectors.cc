#include "tests/controller/apiserver/selectors.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/controller/apiserver/api_status.h"

namespace hptrain::testing {
namespace {

// Splits on commas that are not inside parentheses.
std::vector<std::string> SplitTopLevel(absl::string_view text) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  parts.push_back(current);
  return parts;
}

std::string Trimmed(absl::string_view text) {
  return std::string(absl::StripAsciiWhitespace(text));
}

bool ValidLabelKey(absl::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.' &&
        c != '/') {
      return false;
    }
  }
  return true;
}

absl::Status SelectorError(absl::string_view what, absl::string_view text) {
  return BadRequestError(absl::StrCat("unable to parse requirement: ", what, ": \"", text, "\""));
}

}  // namespace

absl::StatusOr<LabelSelector> LabelSelector::Parse(absl::string_view text) {
  LabelSelector selector;
  if (absl::StripAsciiWhitespace(text).empty()) return selector;
  for (const std::string& raw : SplitTopLevel(text)) {
    std::string part = Trimmed(raw);
    if (part.empty()) return SelectorError("empty requirement", text);
    Requirement req;
    size_t pos;
    if (part[0] == '!') {
      req.key = Trimmed(part.substr(1));
      req.op = Op::kNotExists;
    } else if ((pos = part.find("!=")) != std::string::npos) {
      req.key = Trimmed(part.substr(0, pos));
      req.op = Op::kNotEquals;
      req.values = {Trimmed(part.substr(pos + 2))};
    } else if ((pos = part.find("==")) != std::string::npos) {
      req.key = Trimmed(part.substr(0, pos));
      req.op = Op::kEquals;
      req.values = {Trimmed(part.substr(pos + 2))};
    } else if ((pos = part.find('=')) != std::string::npos) {
      req.key = Trimmed(part.substr(0, pos));
      req.op = Op::kEquals;
      req.values = {Trimmed(part.substr(pos + 1))};
    } else if ((pos = part.find('(')) != std::string::npos) {
      if (part.back() != ')') return SelectorError("missing ')'", part);
      std::vector<std::string> head =
          absl::StrSplit(Trimmed(part.substr(0, pos)), ' ', absl::SkipWhitespace());
      if (head.size() != 2 || (head[1] != "in" && head[1] != "notin")) {
        return SelectorError("expected 'key in (...)' or 'key notin (...)'", part);
      }
      req.key = head[0];
      req.op = head[1] == "in" ? Op::kIn : Op::kNotIn;
      std::string inner = part.substr(pos + 1, part.size() - pos - 2);
      for (absl::string_view value : absl::StrSplit(inner, ',')) {
        req.values.push_back(Trimmed(value));
      }
    } else {
      req.key = part;
      req.op = Op::kExists;
    }
    if (!ValidLabelKey(req.key)) return SelectorError("invalid label key", part);
    selector.requirements_.push_back(std::move(req));
  }
  return selector;
}

LabelSelector LabelSelector::FromObject(const nlohmann::json& selector) {
  LabelSelector out;
  if (!selector.is_object()) return out;
  if (auto labels = selector.find("matchLabels"); labels != selector.end() && labels->is_object()) {
    for (const auto& [key, value] : labels->items()) {
      // A value that is no string equals no label value (label values are strings).
      Requirement req{key, Op::kEquals, {}};
      if (value.is_string()) req.values.push_back(value.get<std::string>());
      out.requirements_.push_back(std::move(req));
    }
  }
  auto expressions = selector.find("matchExpressions");
  if (expressions == selector.end() || !expressions->is_array()) return out;
  for (const nlohmann::json& expression : *expressions) {
    const std::string op = expression.value("operator", "");
    Requirement req{expression.value("key", ""), Op::kIn, {}};
    if (op == "NotIn") {
      req.op = Op::kNotIn;
    } else if (op == "Exists") {
      req.op = Op::kExists;
    } else if (op == "DoesNotExist") {
      req.op = Op::kNotExists;
    } else if (op != "In") {
      continue;
    }
    if (auto values = expression.find("values"); values != expression.end() && values->is_array()) {
      for (const nlohmann::json& v : *values) {
        if (v.is_string()) req.values.push_back(v.get<std::string>());
      }
    }
    out.requirements_.push_back(std::move(req));
  }
  return out;
}

bool LabelSelector::Matches(const nlohmann::json& labels) const {
  for (const Requirement& req : requirements_) {
    bool has = labels.is_object() && labels.contains(req.key) && labels[req.key].is_string();
    std::string value = has ? labels[req.key].get<std::string>() : std::string();
    bool in_values =
        has && std::find(req.values.begin(), req.values.end(), value) != req.values.end();
    switch (req.op) {
      case Op::kEquals:
      case Op::kIn:
        if (!in_values) return false;
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        if (in_values) return false;
        break;
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kNotExists:
        if (has) return false;
        break;
    }
  }
  return true;
}

absl::StatusOr<FieldSelector> FieldSelector::Parse(absl::string_view text,
                                                   const std::vector<std::string>& allowed) {
  FieldSelector selector;
  if (absl::StripAsciiWhitespace(text).empty()) return selector;
  for (absl::string_view raw : absl::StrSplit(text, ',')) {
    std::string part = Trimmed(raw);
    Requirement req;
    std::string key;
    size_t pos;
    if ((pos = part.find("!=")) != std::string::npos) {
      key = Trimmed(part.substr(0, pos));
      req.equals = false;
      req.value = Trimmed(part.substr(pos + 2));
    } else if ((pos = part.find("==")) != std::string::npos) {
      key = Trimmed(part.substr(0, pos));
      req.equals = true;
      req.value = Trimmed(part.substr(pos + 2));
    } else if ((pos = part.find('=')) != std::string::npos) {
      key = Trimmed(part.substr(0, pos));
      req.equals = true;
      req.value = Trimmed(part.substr(pos + 1));
    } else {
      return BadRequestError(
          absl::StrCat("invalid selector: '", text, "'; can't understand '", part, "'"));
    }
    bool known = key == "metadata.name" || key == "metadata.namespace" ||
                 std::find(allowed.begin(), allowed.end(), key) != allowed.end();
    if (!known) return BadRequestError(absl::StrCat("field label not supported: ", key));
    req.path = absl::StrSplit(key, '.');
    selector.requirements_.push_back(std::move(req));
  }
  return selector;
}

bool FieldSelector::Matches(const nlohmann::json& object) const {
  for (const Requirement& req : requirements_) {
    const nlohmann::json* node = &object;
    for (const std::string& key : req.path) {
      if (!node->is_object() || !node->contains(key)) {
        node = nullptr;
        break;
      }
      node = &(*node)[key];
    }
    std::string value;
    if (node != nullptr) value = node->is_string() ? node->get<std::string>() : node->dump();
    if ((value == req.value) != req.equals) return false;
  }
  return true;
}

}  // namespace hptrain::testing
