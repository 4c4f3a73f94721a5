#include <gtest/gtest.h>

#include "core/error.hpp"
#include "launch/launch_env.hpp"
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
