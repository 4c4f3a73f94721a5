// pkb-fake-llm: a scripted stand-in for an LLM endpoint, to try `pkb generate` and `pkb agent`
// without a model or a network. It answers OpenAI, Anthropic and Gemini requests on 127.0.0.1.
//
//   pkb-fake-llm --reply broken.cu --reply solutions/examples/1_allreduce_oneshot.cu &
//   pkb agent 1 --provider openai --base-url http://127.0.0.1:PORT/v1 --model fake --steps 2
//
// Each --reply FILE is one answer, in order; the last one repeats. A .cu/.cpp/.h file is sent as a
// ```cu block after a one-line strategy; any other file is sent as the reply text verbatim.
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "fake_llm.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pkb::fake;
  std::vector<std::string> files;
  FakeLlmServer::Options opts;
  opts.idle_exit_s = 600;
  std::string port_file;
  CLI::App app{"pkb-fake-llm: a scripted fake LLM endpoint (OpenAI, Anthropic, Gemini protocols) on 127.0.0.1"};
  app.add_option("--reply,-r", files, "A reply, in order (the last repeats): .cu/.cpp/.h as a ```cu block, else verbatim")
      ->required();
  app.add_option("--port,-p", opts.port, "Port to listen on (0: any free port)");
  app.add_option("--idle-exit", opts.idle_exit_s, "Exit after this many seconds without a request");
  app.add_option("--port-file", port_file, "Also write the port number to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<Reply> script;
    for (auto& f : files) {
      std::string ext = std::filesystem::path(f).extension().string();
      bool code = ext == ".cu" || ext == ".cpp" || ext == ".cc" || ext == ".h" || ext == ".cuh";
      script.push_back(code ? Reply::code(slurp(f), "Strategy: canned reply from " + f + ".") : Reply::answer(slurp(f)));
    }
    FakeLlmServer server(std::move(script), opts);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (!port_file.empty()) std::ofstream(port_file) << server.port() << "\n";
    std::printf("pkb-fake-llm: listening on %s (OpenAI base URL %s); %zu scripted replies, the last repeats\n",
                server.url().c_str(), server.url("/v1").c_str(), files.size());
    std::fflush(stdout);
    while (!g_stop && server.running()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::printf("pkb-fake-llm: served %zu requests\n", server.requests().size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pkb-fake-llm: %s\n", e.what());
    return 1;
  }
  return 0;
}
