#include "launch/launch_env.hpp"

#include <cstdlib>

#include <unistd.h>

#include "core/error.hpp"
#include "proto/channel.hpp"
#include "proto/tcp.hpp"

extern char** environ;

namespace pkb {

namespace {

std::optional<int> get_int(const std::map<std::string, std::string>& env, const char* key) {
  auto it = env.find(key);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  try {
    size_t used = 0;
    int v = std::stoi(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument(key);
    return v;
  } catch (const std::exception&) {
    fail(Errc::invalid_argument, std::string(key) + "='" + it->second + "' is not an integer");
  }
}

}  // namespace

std::optional<LaunchEnv> launch_env_from(const std::map<std::string, std::string>& env) {
  struct Family {
    const char *source, *rank, *world, *local;
  };
  const Family families[] = {
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"pmi", "PMIX_RANK", "PMIX_SIZE", "MPI_LOCALRANKID"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  for (auto& f : families) {
    auto rank = get_int(env, f.rank);
    if (!rank) continue;
    LaunchEnv le;
    le.source = f.source;
    le.rank = *rank;
    le.world = get_int(env, f.world).value_or(0);
    le.local_rank = get_int(env, f.local).value_or(le.rank);
    if (le.rank < 0 || (le.world > 0 && le.rank >= le.world) || le.local_rank < 0)
      fail(Errc::invalid_argument, std::string(f.source) + " environment is inconsistent: rank " + std::to_string(le.rank) +
                                       " of " + std::to_string(le.world) + ", local rank " + std::to_string(le.local_rank));
    return le;
  }
  return std::nullopt;
}

std::optional<LaunchEnv> launch_env() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string s(*e);
    auto eq = s.find('=');
    if (eq != std::string::npos) env[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return launch_env_from(env);
}

int join_job(const std::string& host_port, const std::string& secret, const LaunchEnv& env) {
  auto [host, port] = split_host_port(host_port);
  int fd = tcp_connect(host, port, std::chrono::seconds(60));
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  send_message(
      fd, {MsgKind::join,
           nlohmann::json{
               {"secret", secret}, {"rank", env.rank}, {"local_rank", env.local_rank}, {"host", name}, {"source", env.source}},
           {}});
  return fd;
}

}  // namespace pkb
