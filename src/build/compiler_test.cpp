// The solution compiler on the CPU: which libraries a source links (decided from its text), and
// that the nvcc command line and the cache key follow that decision (with a fake nvcc).
#include "build/compiler.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/files.hpp"

namespace pkb {
namespace {

using Libs = std::vector<std::string>;
const Libs kAlways{"nccl", "cublas", "cublasLt"};

Libs with(Libs extra) {
  Libs l = kAlways;
  l.insert(l.end(), extra.begin(), extra.end());
  return l;
}

TEST(SolutionLibraries, NcclAndCublasOnlyByDefault) {
  EXPECT_EQ(solution_libraries("#include <pkb/solution.h>\n#include <cublasLt.h>\nint x;\n"), kAlways);
  EXPECT_EQ(solution_libraries(""), kAlways);
}

TEST(SolutionLibraries, CufftFromItsHeaders) {
  EXPECT_EQ(solution_libraries("#include <cufft.h>\n"), with({"cufft"}));
  EXPECT_EQ(solution_libraries("#include \"cufftXt.h\"\n"), with({"cufft"}));
  EXPECT_EQ(solution_libraries("  #  include   <cufft.h>  // FFTs\n"), with({"cufft"}));
}

TEST(SolutionLibraries, CudnnFromItsHeaders) {
  EXPECT_EQ(solution_libraries("#include <cudnn.h>"), with({"cudnn"}));  // no final newline
  EXPECT_EQ(solution_libraries("#include <cudnn_cnn.h>\n"), with({"cudnn"}));
  EXPECT_EQ(solution_libraries("#include <x86_64-linux-gnu/cudnn_version.h>\n"), with({"cudnn"}));
  EXPECT_EQ(solution_libraries("#include <cufft.h>\n#include <cudnn.h>\n"), with({"cufft", "cudnn"}));
  EXPECT_EQ(solution_libraries("#include <cudnn.h>\n#include <cufft.h>\n#include <cudnn_ops.h>\n"), with({"cufft", "cudnn"}));
}

TEST(SolutionLibraries, CommentsMentionsAndLookalikesDoNotCount) {
  EXPECT_EQ(solution_libraries("// #include <cudnn.h>\n"), kAlways);
  EXPECT_EQ(solution_libraries("/* a block\n#include <cudnn.h>\n#include <cufft.h>\n*/\n"), kAlways);
  EXPECT_EQ(solution_libraries("/* x */ #include <cufft.h>\n"), with({"cufft"}));
  EXPECT_EQ(solution_libraries("const char* s = \"#include <cudnn.h>\";\n"), kAlways);
  EXPECT_EQ(solution_libraries("#include <cudnnx.h>\n#include <cufftw.h>\n#include <mycudnn.h>\n"), kAlways);
  EXPECT_EQ(solution_libraries("#define USE <cudnn.h>\n#pragma include <cudnn.h>\n"), kAlways);
}

/// A fake nvcc: answers --version, and otherwise creates the file after -o.
std::filesystem::path fake_nvcc(const std::filesystem::path& dir) {
  auto p = dir / "nvcc";
  write_file_atomic(p,
                    "#!/bin/sh\n"
                    "if [ \"$1\" = --version ]; then echo 'fake nvcc 0.0'; exit 0; fi\n"
                    "while [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then : > \"$2\"; fi; shift; done\n");
  chmod(p.c_str(), 0755);
  return p;
}

class FakeCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("pkb-build-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_ / "src");
    opts_.nvcc = fake_nvcc(dir_);
    opts_.cache_dir = dir_ / "cache";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  CompileResult build(const std::string& name, const std::string& text) {
    auto src = dir_ / "src" / name;
    write_file_atomic(src, text);
    return compile_solution(src, opts_);
  }
  std::filesystem::path dir_;
  CompileOptions opts_;
};

TEST_F(FakeCompile, LinkLineFollowsTheIncludes) {
  auto plain = build("plain.cu", "int x;\n");
  ASSERT_TRUE(plain.ok) << plain.log;
  EXPECT_NE(plain.command.find(" -lnccl -lcublas -lcublasLt"), std::string::npos) << plain.command;
  EXPECT_EQ(plain.command.find("-lcufft"), std::string::npos) << plain.command;
  EXPECT_EQ(plain.command.find("-lcudnn"), std::string::npos) << plain.command;

  auto fft = build("fft.cu", "#include <cufft.h>\nint x;\n");
  ASSERT_TRUE(fft.ok) << fft.log;
  EXPECT_NE(fft.command.find(" -lcublasLt -lcufft"), std::string::npos) << fft.command;
  EXPECT_NE(fft.key, plain.key);
}

TEST_F(FakeCompile, CudnnLinksWhereInstalledAndIsACompileErrorElsewhere) {
  auto r = build("conv.cu", "#include <cudnn.h>\nint x;\n");
  EXPECT_NE(r.command.find("-lcudnn"), std::string::npos) << r.command;
  if (cudnn_available()) {
    EXPECT_TRUE(r.ok) << r.log;
  } else {
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.log.find("cuDNN is not available"), std::string::npos) << r.log;
    EXPECT_FALSE(std::filesystem::exists(r.so_path));
  }
}

}  // namespace
}  // namespace pkb
