#include "core/canonical_json.h"

#include <cmath>

#include "core/json_error.h"

namespace tollgate {
namespace {

bool AllFinite(const Json& v) {
  switch (v.type()) {
    case Json::value_t::number_float:
      return std::isfinite(v.get<double>());
    case Json::value_t::array:
    case Json::value_t::object:
      for (const auto& item : v) {
        if (!AllFinite(item)) return false;
      }
      return true;
    default:
      return true;
  }
}

}  // namespace

Status CanonicalBytes(const Json& value, std::string* out) {
  if (!AllFinite(value)) {
    return Status::Error(errc::kInvalidJson, "NaN and infinity have no JSON form");
  }
  try {
    // nlohmann's object is a std::map: keys come out sorted bytewise.
    *out = value.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::strict);
  } catch (const Json::type_error& e) {
    return Status::Error(errc::kInvalidUtf8, std::string("string is not valid UTF-8: ") + e.what());
  }
  return Status::Ok();
}

std::string ToValidUtf8(std::string_view text) {
  // nlohmann's "replace" handler does exactly this when serialising.
  std::string quoted = Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
  return Json::parse(quoted).get<std::string>();
}

namespace {

// Nesting depth of `text` outside strings, stopping at the first level past
// `max_depth`. Linear, no allocation; malformed input is left to the parser.
bool DepthWithin(std::string_view text, int max_depth, size_t* where) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        *where = i;
        return false;
      }
    } else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return true;
}

}  // namespace

Status ParseJson(std::string_view text, Json* out, const JsonLimits& limits) {
  if (limits.max_bytes > 0 && text.size() > limits.max_bytes) {
    return Status::Error(errc::kJsonTooLarge, "the document is " + std::to_string(text.size()) +
                                                  " bytes; the limit is " + std::to_string(limits.max_bytes));
  }
  size_t where = 0;
  if (!DepthWithin(text, limits.max_depth, &where)) {
    return Status::Error(errc::kJsonTooDeep, "nesting deeper than " + std::to_string(limits.max_depth) +
                                                 " levels at byte " + std::to_string(where));
  }
  try {
    Json parsed = Json::parse(text.begin(), text.end());
    *out = std::move(parsed);
  } catch (const Json::out_of_range& e) {
    // 406: a number literal no double holds (1e999999).
    return Status::Error(errc::kNumberOutOfRange, JsonErrorText(e));
  } catch (const Json::exception& e) {
    return Status::Error(errc::kInvalidJson, JsonErrorText(e));
  } catch (const std::bad_alloc&) {
    return Status::Error(errc::kJsonTooLarge, "the document does not fit in memory");
  }
  return Status::Ok();
}

Status ParseInputJson(std::string_view text, Json* out, size_t max_bytes) {
  JsonLimits limits;
  limits.max_depth = kMaxInputJsonDepth;
  limits.max_bytes = max_bytes;
  return ParseJson(text, out, limits);
}

}  // namespace tollgate
