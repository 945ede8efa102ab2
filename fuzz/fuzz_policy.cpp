// libFuzzer target: a policy file's text through the loader (YAML, the
// expansion cap, schema validation, compilation of every section and rule),
// as `up`, `policy check` and the what-if endpoint load one.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "decide/policy_engine.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tollgate::PolicyPtr policy;
  (void)tollgate::LoadPolicyYaml(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz",
                                 &policy);
  return 0;
}
