// runtime/serial_worker: one task at a time, in order, each outcome collected once.
#include "runtime/serial_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace tollgate {
namespace {

TEST(SerialWorkerTest, RunsEachTaskOnItsThreadAndReturnsItsOutcomeOnce) {
  SerialWorker w;
  EXPECT_FALSE(w.outstanding());
  EXPECT_TRUE(w.Collect(true)->ok()) << "nothing handed over: Ok";
  std::thread::id ran_on;
  w.Hand([&] {
    ran_on = std::this_thread::get_id();
    return Status::Error("E_TEST", "first failed");
  });
  EXPECT_TRUE(w.outstanding());
  std::optional<Status> s = w.Collect(/*wait=*/true);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->code(), "E_TEST");
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_FALSE(w.outstanding());
  EXPECT_TRUE(w.Collect(true)->ok()) << "an outcome is collected once";
}

TEST(SerialWorkerTest, ATaskStillRunningIsReportedAsNotDoneWithoutWaiting) {
  SerialWorker w;
  std::atomic<bool> release{false};
  std::atomic<bool> finished{false};
  w.Hand([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    finished = true;
    return Status::Ok();
  });
  EXPECT_FALSE(w.Collect(/*wait=*/false).has_value());
  EXPECT_TRUE(w.outstanding());
  release = true;
  std::optional<Status> s = w.Collect(/*wait=*/true);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->ok());
  EXPECT_TRUE(finished.load()) << "Collect(wait) returned before the task ended";
}

TEST(SerialWorkerTest, TasksRunInTheOrderHandedOver) {
  SerialWorker w;
  std::vector<int> order;  // written by the worker, read after each Collect
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(w.Collect(true)->ok());
    w.Hand([&order, i] {
      order.push_back(i);
      return Status::Ok();
    });
  }
  ASSERT_TRUE(w.Collect(true)->ok());
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(SerialWorkerTest, TheDestructorWaitsForATaskHandedOver) {
  std::atomic<bool> ran{false};
  {
    SerialWorker w;
    w.Hand([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ran = true;
      return Status::Ok();
    });
  }
  EXPECT_TRUE(ran.load());
}

TEST(SerialWorkerTest, WaitIdleWaitsForTheTaskAndLeavesItsOutcomeToCollect) {
  SerialWorker w;
  w.WaitIdle();  // nothing handed over: returns at once
  std::atomic<bool> finished{false};
  w.Hand([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    finished = true;
    return Status::Error("E_TEST", "kept");
  });
  w.WaitIdle();
  EXPECT_TRUE(finished.load());
  EXPECT_TRUE(w.outstanding()) << "waiting is not collecting";
  std::optional<Status> s = w.Collect(/*wait=*/false);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->code(), "E_TEST");
}

}  // namespace
}  // namespace tollgate
