// Where a worker learns its place when a job launcher (mpirun, srun) started it: rank, world size
// and local rank from the launcher's environment variables (OpenMPI, PMI/PMIx, Slurm).
#pragma once
#include <map>
#include <optional>
#include <string>

namespace pkb {

struct LaunchEnv {
  int rank = 0, world = 0, local_rank = 0;
  std::string source;  // "openmpi", "pmi", "slurm"
};

/// Reads rank/world/local rank from `env` (OMPI_COMM_WORLD_*, PMI_*/PMIX_*, SLURM_*), first match
/// wins; nullopt when none is set. Throws Error(invalid_argument) on inconsistent values.
std::optional<LaunchEnv> launch_env_from(const std::map<std::string, std::string>& env);

/// The same from this process's environment.
std::optional<LaunchEnv> launch_env();

/// Worker side of MpiLauncher: connects to the driver at `host_port`, sends the join message (the
/// job's secret, rank, local rank, host) and returns the channel's fd. Throws Error on failure.
int join_job(const std::string& host_port, const std::string& secret, const LaunchEnv& env);

}  // namespace pkb
