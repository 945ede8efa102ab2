// runtime/committed_outputs: which re-made outputs are already committed.
#include "runtime/committed_outputs.h"

#include <gtest/gtest.h>

#include "core/messages.h"

namespace tollgate {
namespace {

Message Out(const std::string& topic, const std::string& key, const std::string& value,
            const std::string& source) {
  Message m{topic, -1, -1, key, value, {}};
  if (!source.empty()) m.headers[kHeaderSource] = source;
  return m;
}

TEST(CommittedOutputsTest, ParsesAMessageSourceAndRefusesAnythingElse) {
  std::string inc, topic;
  int32_t p = -1;
  int64_t o = -1;
  ASSERT_TRUE(ParseMessageSource("ext/tollgate.execute/2/1234", &inc, &topic, &p, &o));
  EXPECT_EQ(inc, "ext");
  EXPECT_EQ(topic, "tollgate.execute");
  EXPECT_EQ(p, 2);
  EXPECT_EQ(o, 1234);
  for (const char* bad : {"", "ext", "ext/t/1", "ext/tick/decide", "ext/t/x/1", "ext/t/1/x", "ext/t/-1/5",
                          "ext/t/1/-5", "ext/t/1/5/6", "ext/t//5", "ext/t/1/", "ext/t/1/5x"}) {
    EXPECT_FALSE(ParseMessageSource(bad, &inc, &topic, &p, &o)) << bad;
  }
}

TEST(CommittedOutputsTest, AnOutputCountsAsCommittedOnlyWithTheSameSourceTopicKeyAndValue) {
  CommittedOutputs c("ext", {"in"});
  c.Add(Out("out", "k", "v", "ext/in/0/7"));
  EXPECT_EQ(c.size(), 1u);
  EXPECT_FALSE(c.Contains(Out("out", "k", "v2", "ext/in/0/7"))) << "other value";
  EXPECT_FALSE(c.Contains(Out("out", "k2", "v", "ext/in/0/7"))) << "other key";
  EXPECT_FALSE(c.Contains(Out("out2", "k", "v", "ext/in/0/7"))) << "other topic";
  EXPECT_FALSE(c.Contains(Out("out", "k", "v", "ext/in/0/8"))) << "other offset";
  EXPECT_FALSE(c.Contains(Out("out", "k", "v", "ext/in/1/7"))) << "other partition";
  EXPECT_FALSE(c.Contains(Out("out", "k", "v", ""))) << "no source";
  EXPECT_TRUE(c.Contains(Out("out", "k", "v", "ext/in/0/7")));
  EXPECT_TRUE(c.Contains(Out("out", "k", "v", "ext/in/0/7"))) << "every re-made copy: the readers have one";
  c.Add(Out("out", "k", "v", "ext/in/0/7"));  // read back twice (start, then after a failed transaction)
  EXPECT_EQ(c.size(), 1u);
}

TEST(CommittedOutputsTest, KeyAndValueBoundariesDoNotRunTogether) {
  CommittedOutputs c("ext", {"in"});
  c.Add(Out("out", "ab", "c", "ext/in/0/1"));
  EXPECT_FALSE(c.Contains(Out("out", "a", "bc", "ext/in/0/1")));
  EXPECT_TRUE(c.Contains(Out("out", "ab", "c", "ext/in/0/1")));
}

TEST(CommittedOutputsTest, OutputsOfOtherInputsOrAnotherBrokerIncarnationAreIgnored) {
  CommittedOutputs c("emb-1", {"in"});
  c.Add(Out("out", "k", "v", "emb-0/in/0/1"));     // an earlier embedded broker: its offsets mean nothing now
  c.Add(Out("out", "k", "v", "emb-1/other/0/1"));  // another stage's input
  c.Add(Out("out", "k", "v", ""));                 // an agent's own message
  c.Add(Out("out", "k", "v", "emb-1/tick/x"));     // a tick's output
  EXPECT_TRUE(c.empty());
  EXPECT_FALSE(c.Contains(Out("out", "k", "v", "emb-1/in/0/1")));
}

TEST(CommittedOutputsTest, InputsBelowTheCommittedOffsetAreForgotten) {
  CommittedOutputs c("ext", {"in"});
  for (int o = 0; o < 10; ++o)
    c.Add(Out("out", "k", "v" + std::to_string(o), "ext/in/0/" + std::to_string(o)));
  c.Add(Out("out", "k", "v3", "ext/in/1/3"));
  c.ForgetBelow({{{"in", 0}, 5}});
  EXPECT_EQ(c.size(), 6u);
  EXPECT_FALSE(c.Contains(Out("out", "k", "v4", "ext/in/0/4")));
  EXPECT_TRUE(c.Contains(Out("out", "k", "v5", "ext/in/0/5")));
  EXPECT_TRUE(c.Contains(Out("out", "k", "v3", "ext/in/1/3"))) << "another partition keeps its entries";
  c.ForgetBelow({{{"in", 0}, 100}});
  EXPECT_EQ(c.size(), 1u);
  c.ForgetBelow({{{"in", 1}, 4}});
  EXPECT_TRUE(c.empty());
}

TEST(CommittedOutputsTest, OutputsOfInputsBelowTheGroupsCommittedOffsetAreNotKept) {
  CommittedOutputs c("ext", {"in"});
  c.SetCommitted({{{"in", 0}, 5}});
  for (int o = 0; o < 10; ++o) c.Add(Out("out", "k", "v", "ext/in/0/" + std::to_string(o)));
  c.Add(Out("out", "k", "v", "ext/in/1/0"));  // no offset committed there: kept
  EXPECT_EQ(c.size(), 6u);
  EXPECT_FALSE(c.Contains(Out("out", "k", "v", "ext/in/0/4")));
  EXPECT_TRUE(c.Contains(Out("out", "k", "v", "ext/in/0/5")));
  EXPECT_TRUE(c.Contains(Out("out", "k", "v", "ext/in/1/0")));
}

}  // namespace
}  // namespace tollgate
