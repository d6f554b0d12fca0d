#include "controller/promql/text_format.h"

#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/promql/number.h"

namespace hptrain::promql {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLabelNameChar(char c, bool first) {
  return IsAlpha(c) || c == '_' || (!first && IsDigit(c));
}
bool IsMetricNameChar(char c, bool first) { return IsLabelNameChar(c, first) || c == ':'; }

std::string Quote(absl::string_view text) {
  return absl::StrCat("\"", absl::CHexEscape(text), "\"");
}

// One line being parsed. Every read checks the position against the line's end, which is what
// keeps the parser inside the caller's buffer.
class LineParser {
 public:
  LineParser(absl::string_view line, int line_number) : line_(line), line_number_(line_number) {}

  // Parses the line; appends a sample to `out` if it holds one.
  absl::Status Parse(std::vector<Sample>* out) {
    SkipBlanks();
    if (AtEnd()) return absl::OkStatus();
    if (Peek() == '#') return ParseComment();
    Sample sample;
    absl::Status status = ParseSample(&sample);
    if (status.ok()) out->push_back(std::move(sample));
    return status;
  }

 private:
  bool AtEnd() const { return pos_ >= line_.size(); }
  char Peek() const { return line_[pos_]; }  // only when !AtEnd()
  void SkipBlanks() {
    while (!AtEnd() && IsBlank(Peek())) ++pos_;
  }

  // What the cursor is on, for messages: 'x', or "end of line".
  std::string Found() const {
    if (AtEnd()) return "end of line";
    return absl::StrCat("'", absl::CHexEscape(line_.substr(pos_, 1)), "'");
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("line ", line_number_, ": ", what));
  }

  // The longest run of non-blank bytes at the cursor.
  absl::string_view Token() {
    size_t start = pos_;
    while (!AtEnd() && !IsBlank(Peek())) ++pos_;
    return line_.substr(start, pos_ - start);
  }

  absl::string_view MetricName() {
    size_t start = pos_;
    while (!AtEnd() && IsMetricNameChar(Peek(), pos_ == start)) ++pos_;
    return line_.substr(start, pos_ - start);
  }

  absl::string_view LabelName() {
    size_t start = pos_;
    while (!AtEnd() && IsLabelNameChar(Peek(), pos_ == start)) ++pos_;
    return line_.substr(start, pos_ - start);
  }

  absl::Status ParseComment() {
    ++pos_;  // '#'
    SkipBlanks();
    absl::string_view keyword = Token();
    if (keyword != "HELP" && keyword != "TYPE") return absl::OkStatus();  // a plain comment
    SkipBlanks();
    if (AtEnd()) return absl::OkStatus();  // "# HELP" alone is a plain comment too (as in expfmt)
    absl::string_view name = MetricName();
    if (name.empty() || (!AtEnd() && !IsBlank(Peek()))) {
      return Error(absl::StrCat("invalid metric name in # ", keyword, " line, found ", Found()));
    }
    SkipBlanks();
    if (keyword == "HELP") {
      for (; !AtEnd(); ++pos_) {
        if (Peek() != '\\') continue;
        ++pos_;
        if (AtEnd() || (Peek() != '\\' && Peek() != 'n')) {
          return Error(absl::StrCat("invalid escape in # HELP text of ", Quote(name),
                                    ": '\\' then ", Found(), " (only \\\\ and \\n are allowed)"));
        }
      }
      return absl::OkStatus();
    }
    if (AtEnd()) return absl::OkStatus();  // "# TYPE name" without a type: a plain comment
    absl::string_view type = line_.substr(pos_);
    while (!type.empty() && IsBlank(type.back())) type.remove_suffix(1);
    if (type != "counter" && type != "gauge" && type != "histogram" && type != "summary" &&
        type != "untyped") {
      return Error(absl::StrCat("unknown metric type ", Quote(type), " for ", Quote(name),
                                " (want counter, gauge, histogram, summary or untyped)"));
    }
    return absl::OkStatus();
  }

  absl::Status ParseSample(Sample* sample) {
    absl::string_view name = MetricName();
    if (name.empty()) return Error(absl::StrCat("expected a metric name, found ", Found()));
    sample->labels.emplace("__name__", std::string(name));
    size_t name_end = pos_;
    SkipBlanks();
    bool separated = pos_ > name_end;  // the value needs a blank before it, or the label set
    if (!AtEnd() && Peek() == '{') {
      ++pos_;
      absl::Status status = ParseLabels(name, sample);
      if (!status.ok()) return status;
      SkipBlanks();
      separated = true;
    }
    if (AtEnd()) {
      return Error(absl::StrCat("expected a value for ", Quote(name), ", found end of line"));
    }
    if (!separated) {
      // The name ran into a byte that can neither continue it nor follow it ("foo-bar 1").
      return Error(absl::StrCat("invalid character ", Found(), " after metric name ", Quote(name)));
    }
    absl::string_view value = Token();
    if (!ParseFloatValue(value, &sample->value)) {
      return Error(absl::StrCat("invalid value ", Quote(value), " for ", Quote(name),
                                " (want a float, NaN, +Inf or -Inf)"));
    }
    SkipBlanks();
    if (AtEnd()) return absl::OkStatus();
    absl::string_view timestamp = Token();
    int64_t millis = 0;
    // SimpleAtoi would also accept surrounding spaces; Token() has none.
    if (!absl::SimpleAtoi(timestamp, &millis)) {
      return Error(absl::StrCat("invalid timestamp ", Quote(timestamp), " for ", Quote(name),
                                " (want integer milliseconds)"));
    }
    sample->timestamp_seconds = static_cast<double>(millis) / 1000.0;
    SkipBlanks();
    if (!AtEnd()) {
      return Error(absl::StrCat("unexpected ", Quote(line_.substr(pos_)),
                                " after the timestamp of ", Quote(name)));
    }
    return absl::OkStatus();
  }

  // After '{': label pairs up to and including '}'.
  absl::Status ParseLabels(absl::string_view metric, Sample* sample) {
    while (true) {
      SkipBlanks();
      if (AtEnd()) {
        return Error(absl::StrCat("unterminated label set of ", Quote(metric)));
      }
      if (Peek() == '}') {
        ++pos_;
        return absl::OkStatus();
      }
      absl::string_view label = LabelName();
      if (label.empty()) {
        return Error(absl::StrCat("expected a label name in the labels of ", Quote(metric),
                                  ", found ", Found()));
      }
      SkipBlanks();
      if (AtEnd() || Peek() != '=') {
        return Error(
            absl::StrCat("expected '=' after label name ", Quote(label), ", found ", Found()));
      }
      ++pos_;
      SkipBlanks();
      if (AtEnd() || Peek() != '"') {
        return Error(absl::StrCat("expected '\"' to open the value of label ", Quote(label),
                                  ", found ", Found()));
      }
      ++pos_;
      std::string value;
      absl::Status status = LabelValue(label, &value);
      if (!status.ok()) return status;
      if (label == "__name__") {
        return Error(absl::StrCat("label name \"__name__\" is reserved (in ", Quote(metric), ")"));
      }
      if (!sample->labels.emplace(std::string(label), std::move(value)).second) {
        return Error(absl::StrCat("duplicate label name ", Quote(label), " in ", Quote(metric)));
      }
      SkipBlanks();
      if (AtEnd()) return Error(absl::StrCat("unterminated label set of ", Quote(metric)));
      if (Peek() == ',') {
        ++pos_;
      } else if (Peek() != '}') {
        return Error(absl::StrCat("expected ',' or '}' after the value of label ", Quote(label),
                                  ", found ", Found()));
      }
    }
  }

  // After the opening quote: the escaped value up to and including the closing quote.
  absl::Status LabelValue(absl::string_view label, std::string* value) {
    while (!AtEnd()) {
      char c = Peek();
      ++pos_;
      if (c == '"') return absl::OkStatus();
      if (c != '\\') {
        value->push_back(c);
        continue;
      }
      if (AtEnd()) break;
      char escaped = Peek();
      if (escaped == '\\' || escaped == '"') {
        value->push_back(escaped);
      } else if (escaped == 'n') {
        value->push_back('\n');
      } else {
        return Error(absl::StrCat("invalid escape '\\", absl::CHexEscape(line_.substr(pos_, 1)),
                                  "' in the value of label ", Quote(label),
                                  " (only \\\\, \\\" and \\n are allowed)"));
      }
      ++pos_;
    }
    return Error(absl::StrCat("unterminated value of label ", Quote(label)));
  }

  const absl::string_view line_;
  const int line_number_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<Sample>> ParseTextFormat(absl::string_view text) {
  std::vector<Sample> samples;
  int line_number = 0;
  while (!text.empty()) {
    ++line_number;
    size_t newline = text.find('\n');
    absl::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == absl::string_view::npos ? text.size() : newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    absl::Status status = LineParser(line, line_number).Parse(&samples);
    if (!status.ok()) return status;
  }
  return samples;
}

}  // namespace hptrain::promql
