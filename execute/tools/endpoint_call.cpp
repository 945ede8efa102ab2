#include "execute/tools/endpoint_call.h"

#include <curl/curl.h>

#include "core/url.h"
#include "execute/net_pin.h"
#include "execute/tool.h"

namespace tollgate {
namespace {

struct Capped {
  std::string data;
  size_t cap;
  bool over = false;
};

size_t OnData(char* p, size_t size, size_t n, void* ud) {
  auto* b = static_cast<Capped*>(ud);
  if (b->data.size() + size * n > b->cap) {
    b->over = true;
    return 0;  // stop reading
  }
  b->data.append(p, size * n);
  return size * n;
}

}  // namespace

bool CallEndpoint(const EndpointCall& call, const std::vector<Cidr>& allow, EndpointAnswer* answer,
                  Json* error) {
  NormalUrl url;
  std::string why;
  if (!NormalizeUrl(call.url, "", &url, &why)) {
    *error = ToolFail(errc::kUrlForbidden, call.what + ": " + why);
    return false;
  }
  const std::string where = " (" + url.scheme + "://" + url.host + ":" + url.port + url.path + ")";
  Pin pin;
  switch (PinHost(url.host, allow, &pin, &why)) {
    case PinResult::kForbidden:
      *error = ToolFail(errc::kUrlForbidden, call.what + where + ": " + why);
      return false;
    case PinResult::kUnresolved:
      *error = ToolFail(errc::kHttp, call.what + where + ": " + why, true);
      return false;
    case PinResult::kOk:
      break;
  }
  static const bool once = (curl_global_init(CURL_GLOBAL_DEFAULT), true);
  (void)once;
  CURL* c = curl_easy_init();
  curl_slist* resolve = curl_slist_append(nullptr, PinnedResolveEntry(url.host, url.port, pin).c_str());
  curl_slist* hdrs = nullptr;
  for (const auto& h : call.headers) hdrs = curl_slist_append(hdrs, h.c_str());
  Capped out{std::string(), call.max_bytes};
  curl_easy_setopt(c, CURLOPT_URL, url.full.c_str());
  PinConnection(c, resolve, &pin);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(call.timeout_ms));
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, call.method.c_str());
  if (!call.body.empty()) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, call.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(call.body.size()));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnData);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "tollgate/1");
  const CURLcode rc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  curl_slist_free_all(resolve);
  curl_slist_free_all(hdrs);
  if (!pin.refused.empty()) {
    *error = ToolFail(errc::kUrlForbidden,
                      call.what + where + ": connection refused by the guard: " + pin.refused);
  } else if (out.over) {
    *error = ToolFail(errc::kTooLarge, call.what + where + ": the answer is over " +
                                           std::to_string(call.max_bytes) + " bytes");
  } else if (rc == CURLE_OPERATION_TIMEDOUT) {
    *error =
        ToolFail(errc::kHttpTimeout,
                 call.what + where + ": no answer within " + std::to_string(call.timeout_ms) + " ms", true);
  } else if (rc != CURLE_OK) {
    *error = ToolFail(errc::kHttp, call.what + where + ": " + curl_easy_strerror(rc), true);
  } else if (status < 200 || status >= 300) {
    *error = ToolFail(errc::kHttpStatus, call.what + where + " answered HTTP " + std::to_string(status),
                      status >= 500 || status == 429);
  } else if (!ParseInputJson(out.data, &answer->json).ok()) {
    *error = ToolFail(errc::kHttp, call.what + where + ": the answer is not JSON");
  } else {
    answer->status = status;
    answer->body = std::move(out.data);
    return true;
  }
  return false;
}

}  // namespace tollgate
