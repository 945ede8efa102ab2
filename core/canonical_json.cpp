#include "core/canonical_json.h"

#include <cmath>

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

Status ParseJson(std::string_view text, Json* out) {
  try {
    *out = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    return Status::Error(errc::kInvalidJson, "malformed JSON at byte " + std::to_string(e.byte) + ": " +
                                                 ToValidUtf8(e.what()));
  }
  return Status::Ok();
}

}  // namespace tollgate
