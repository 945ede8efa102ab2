// nlohmann::json's exceptions in our words (core/json_error.h).
#include "core/json_error.h"

#include <string_view>
#include <vector>

namespace tollgate {
namespace {

// "a string", "an object", "null": a JSON type name with its article.
std::string WithArticle(std::string_view type) {
  if (type == "null") return "null";
  if (type == "object" || type == "array") return "an " + std::string(type);
  return "a " + std::string(type);
}

// The library's message without its "[json.exception.type_error.302] " tag.
std::string_view Untagged(std::string_view what) {
  if (!what.starts_with("[json.exception.")) return what;
  const size_t close = what.find("] ");
  return close == std::string_view::npos ? what : what.substr(close + 2);
}

// The token names nlohmann puts after "; expected " (lexer::token_type_name):
// only these are repeated, so nothing the document said can be.
bool KnownTokenName(std::string_view s) {
  static constexpr std::string_view kNames[] = {"true literal",
                                                "false literal",
                                                "null literal",
                                                "string literal",
                                                "number literal",
                                                "'['",
                                                "'{'",
                                                "']'",
                                                "'}'",
                                                "':'",
                                                "','",
                                                "end of input",
                                                "'[', '{', or a literal",
                                                "unknown token"};
  for (std::string_view n : kNames) {
    if (s == n) return true;
  }
  return false;
}

// "parse error at line 1, column 6: syntax error while parsing value -
// unexpected end of input; expected '[', '{', or a literal", with the
// "last read: '...'" part (the document's own bytes) dropped.
std::string ParseErrorText(const Json::exception& e, std::string_view msg) {
  std::string out = "malformed JSON";
  if (const auto* pe = dynamic_cast<const Json::parse_error*>(&e); pe != nullptr && pe->byte > 0) {
    out += " at byte " + std::to_string(pe->byte);
  }
  constexpr std::string_view kAt = "parse error at ";
  const size_t at = msg.find(kAt);
  const size_t colon = at == std::string_view::npos ? std::string_view::npos : msg.find(": ", at);
  if (colon != std::string_view::npos) {
    out += " (" + std::string(msg.substr(at + kAt.size(), colon - at - kAt.size())) + ")";
  }
  const size_t dash = msg.find(" - ");
  if (dash == std::string_view::npos) return out;
  std::string_view rest = msg.substr(dash + 3);
  std::string_view expected;
  if (const size_t e2 = rest.rfind("; expected "); e2 != std::string_view::npos) {
    if (KnownTokenName(rest.substr(e2 + 11))) expected = rest.substr(e2 + 11);
  }
  // The lexer's own message may hold "; expected digit ...": cut at the
  // echo of the input when there is one, else at the token expected.
  size_t end = rest.find("; last read: ");
  if (end == std::string_view::npos && !expected.empty()) end = rest.rfind("; expected ");
  out += ": " + std::string(rest.substr(0, end));
  if (!expected.empty()) out += "; expected " + std::string(expected);
  return out;
}

// The JSON pointers of the values of type `type` in `doc`, breadth first,
// a few levels down: the fields a "type must be X, but is Y" may be about.
std::vector<std::string> FieldsOfType(const Json& doc, std::string_view type) {
  struct At {
    const Json* v;
    std::string ptr;
    int depth;
  };
  std::vector<std::string> found;
  std::vector<At> queue{{&doc, "", 0}};
  for (size_t i = 0; i < queue.size() && i < 2000 && found.size() < 4; ++i) {
    const At at = queue[i];
    if (!at.ptr.empty() && at.v->type_name() == type) found.push_back(at.ptr);
    if (at.depth >= 4) continue;
    if (at.v->is_object()) {
      for (const auto& [k, v] : at.v->items()) {
        std::string token;
        for (char c : k.substr(0, 64)) token += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
        queue.push_back({&v, at.ptr + "/" + ToValidUtf8(token), at.depth + 1});
      }
    } else if (at.v->is_array()) {
      for (size_t k = 0; k < at.v->size(); ++k)
        queue.push_back({&(*at.v)[k], at.ptr + "/" + std::to_string(k), at.depth + 1});
    }
  }
  return found;
}

// "expected a string, got a number", placed at the field when `doc` says which.
std::string WrongType(std::string_view expected, std::string_view got, const Json* doc) {
  const std::string what = "expected " + WithArticle(expected) + ", got " + WithArticle(got);
  if (doc == nullptr) return "a field has the wrong type: " + what;
  // value() or [key] on a body that is not an object: the body itself.
  if (expected == "object" && doc->type_name() == got) return "the document: " + what;
  std::vector<std::string> fields = FieldsOfType(*doc, got);
  if (fields.empty())
    return (doc->type_name() == got ? "the document: " : "a field has the wrong type: ") + what;
  if (fields.size() == 1) return fields[0] + ": " + what;
  std::string list;
  for (size_t i = 0; i < fields.size() && i < 3; ++i) list += (i ? ", " : "") + fields[i];
  return "one of " + list + (fields.size() > 3 ? ", ..." : "") + ": " + what;
}

}  // namespace

std::string JsonErrorText(const Json::exception& e, const Json* doc) {
  const std::string_view msg = Untagged(e.what());
  if (dynamic_cast<const Json::parse_error*>(&e) != nullptr) return ParseErrorText(e, msg);
  switch (e.id) {
    case 302: {  // "type must be string, but is number"
      constexpr std::string_view kMust = "type must be ", kBut = ", but is ";
      const size_t but = msg.find(kBut);
      if (msg.starts_with(kMust) && but != std::string_view::npos) {
        return WrongType(msg.substr(kMust.size(), but - kMust.size()), msg.substr(but + kBut.size()), doc);
      }
      break;
    }
    case 304:    // "cannot use at() with array"
    case 305:    // "cannot use operator[] with a string argument with array"
    case 306: {  // "cannot use value() with array"
      const size_t with = msg.rfind(" with ");
      if (with != std::string_view::npos) return WrongType("object", msg.substr(with + 6), doc);
      break;
    }
    case 316:
      return "a string is not valid UTF-8";
    case 401:
      return "an array has fewer items than expected";
    case 403: {  // "key 'x' not found": a key our code asked for
      const size_t open = msg.find('\'');
      const size_t close = open == std::string_view::npos ? open : msg.find('\'', open + 1);
      if (close != std::string_view::npos) {
        return "missing required field '" + ToValidUtf8(msg.substr(open + 1, close - open - 1)) + "'";
      }
      return "a required field is missing";
    }
    case 406:
      return std::string("a number is out of range (JSON numbers must be ") + kJsonNumberRange + ")";
    default:
      break;
  }
  return ToValidUtf8(msg);
}

}  // namespace tollgate
