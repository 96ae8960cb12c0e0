// Machine activity from /proc: the parser, and a busy process beside us is seen as such.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "concurdl/harness/noise.hpp"

using namespace concurdl;

TEST(Noise, ParsesTheCpuLineOfProcStat) {
  const auto t = parse_proc_stat("cpu  100 20 30 1000 5 6 7 8 0 0");
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->busy, 100 + 20 + 30 + 6 + 7);
  EXPECT_DOUBLE_EQ(t->steal, 8);
  EXPECT_DOUBLE_EQ(t->total, 163 + 1000 + 5 + 8);
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8"));
  EXPECT_FALSE(parse_proc_stat("intr 1 2 3"));
  EXPECT_FALSE(parse_proc_stat("cpu 1 2"));
}

TEST(Noise, ActivityIsOtherProcessesCpuTimeInCpus) {
  const long tck = sysconf(_SC_CLK_TCK);
  CpuTimes a, b;
  b.total = 2.0 * tck;  // two CPUs for one second
  b.busy = 1.5 * tck;   // one and a half of them busy...
  b.self = 0.5 * tck;   // ...half a CPU of it ours
  b.steal = 0.1 * tck;
  const Activity act = activity_between(a, b, 1.0);
  EXPECT_NEAR(act.others_cpus, 1.0, 1e-9);
  EXPECT_NEAR(act.steal_cpus, 0.1, 1e-9);
}

// A child that burns a CPU for as long as it lives: the check must call the machine busy.
TEST(Noise, ABusyProcessBesideUsIsReported) {
  if (!read_cpu_times()) GTEST_SKIP() << "/proc/stat cannot be read here";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    volatile unsigned long x = 0;
    for (;;) x = x + 1;
  }
  Activity act;
  const std::string line = quiet_check(0.5, &act);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_GE(act.others_cpus, 0.5) << "the spinning child used about one CPU";
  EXPECT_NE(line.find("the machine is not quiet"), std::string::npos) << line;
}
