#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "launch/launch_env.hpp"
#include "launch/launcher.hpp"
#include "proto/tcp.hpp"

namespace pkb {
namespace {

TEST(LaunchEnv, ReadsOpenMpiPmiAndSlurm) {
  auto o = launch_env_from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->rank, 3);
  EXPECT_EQ(o->world, 8);
  EXPECT_EQ(o->local_rank, 1);
  EXPECT_EQ(o->source, "openmpi");
  auto s = launch_env_from({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "5"}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->source, "slurm");
  EXPECT_EQ(s->rank, 5);
  auto p = launch_env_from({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}});
  ASSERT_TRUE(p);
  EXPECT_EQ(p->source, "pmi");
  EXPECT_EQ(p->local_rank, 2);  // no local rank given: the rank
  // OpenMPI wins over Slurm when both are set (mpirun inside an allocation).
  auto both = launch_env_from({{"SLURM_PROCID", "0"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_EQ(both->source, "openmpi");
  EXPECT_FALSE(launch_env_from({{"HOME", "/root"}}));
}

TEST(LaunchEnv, RejectsNonsense) {
  EXPECT_THROW(launch_env_from({{"OMPI_COMM_WORLD_RANK", "x"}}), Error);
  EXPECT_THROW(launch_env_from({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}), Error);
  EXPECT_THROW(launch_env_from({{"SLURM_PROCID", "-1"}}), Error);
}

TEST(Tcp, HostPort) {
  EXPECT_EQ(split_host_port("node7:4242"), (std::pair<std::string, int>{"node7", 4242}));
  EXPECT_THROW(split_host_port("node7"), Error);
  EXPECT_THROW(split_host_port("node7:99999"), Error);
  EXPECT_THROW(split_host_port(":1"), Error);
}

}  // namespace
}  // namespace pkb

namespace pkb {
namespace {

namespace fs = std::filesystem;

/// A file in /dev/shm named like NCCL's segments, made after the job started.
fs::path make_segment(const std::string& tag) {
  fs::path p = fs::path("/dev/shm") / ("nccl-pkbtest-" + std::to_string(::getpid()) + "-" + tag);
  std::ofstream(p) << "x";
  return p;
}

std::unique_ptr<Job> sleeping_job(const fs::path& logs, const char* script) {
  LaunchRequest req;
  req.world = 1;
  req.worker_argv = {"/bin/sh", "-c", script};
  req.log_dir = logs;
  req.use_cgroup = false;
  LocalLauncher l;
  return l.launch(req);
}

// A killed job's leftover NCCL segments are removed, but never one a live process still holds open
// (a job running beside it: removing those broke its NCCL), and a job that ended cleanly removes
// nothing (NCCL unlinks its own).
TEST(LocalLauncher, RemovesOnlyItsOwnStaleNcclSegments) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  fs::path logs = fs::temp_directory_path() / ("pkb_launch_test_" + std::to_string(::getpid()));
  {
    auto job = sleeping_job(logs, "sleep 30");
    fs::path stale = make_segment("stale"), held = make_segment("held");
    int fd = ::open(held.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    job.reset();  // killed: not a clean end
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(held)) << "a segment another process holds open was removed";
    ::close(fd);
    fs::remove(held);
  }
  {
    auto job = sleeping_job(logs, "exit 0");
    fs::path left = make_segment("clean");
    EXPECT_TRUE(job->wait_all(Clock::now() + std::chrono::seconds(10)));
    job.reset();
    EXPECT_TRUE(fs::exists(left)) << "a job that ended cleanly removed a segment";
    fs::remove(left);
  }
  fs::remove_all(logs);
}

}  // namespace
}  // namespace pkb
