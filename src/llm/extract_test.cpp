#include <gtest/gtest.h>

#include "llm/extract.hpp"

namespace pkb {
namespace {

TEST(Extract, PicksTheLargestCodeBlockAndKeepsTheRestAsStrategy) {
  std::string reply =
      "Plan:\n- stage into symmetric memory\n\n```cpp\nint helper();\n```\n\nThe file:\n\n```cu\n#include <pkb/solution.h>\n"
      "extern \"C\" int pkb_run() { return 0; }\n```\nDone.\n";
  ExtractedCode x = extract_code(reply);
  ASSERT_TRUE(x.code);
  EXPECT_EQ(*x.code, "#include <pkb/solution.h>\nextern \"C\" int pkb_run() { return 0; }\n");
  EXPECT_EQ(x.lang, "cu");
  EXPECT_TRUE(x.terminated);
  EXPECT_NE(x.strategy.find("stage into symmetric memory"), std::string::npos);
  EXPECT_NE(x.strategy.find("int helper();"), std::string::npos) << "the smaller block stays in the strategy";
  EXPECT_EQ(x.strategy.find("pkb_run"), std::string::npos);
  EXPECT_NE(x.strategy.find("Done."), std::string::npos);
}

TEST(Extract, AcceptsEveryCppTagCaseInsensitively) {
  for (const char* tag : {"cu", "CUDA", "cpp", "c++", "cxx", "cc", "c", "cuda title=\"x.cu\""}) {
    ExtractedCode x = extract_code(std::string("```") + tag + "\nint x;\n```\n");
    ASSERT_TRUE(x.code) << tag;
    EXPECT_EQ(*x.code, "int x;\n") << tag;
  }
}

TEST(Extract, UntaggedBlockCountsOnlyWhenItDefinesTheEntryPoint) {
  ExtractedCode with = extract_code("text\n```\nint pkb_run(pkb_context*);\n```\n```\nls -l\n```\n");
  ASSERT_TRUE(with.code);
  EXPECT_EQ(*with.code, "int pkb_run(pkb_context*);\n");
  EXPECT_FALSE(extract_code("```\nls -l\n```\n").code);
  EXPECT_FALSE(extract_code("```python\ndef pkb_run(): pass\n```\n").code) << "another language is not a solution";
}

TEST(Extract, NoBlockMeansNoCodeAndTheWholeReplyIsTheStrategy) {
  ExtractedCode x = extract_code("  I would use a ring all-reduce.\n");
  EXPECT_FALSE(x.code);
  EXPECT_EQ(x.strategy, "I would use a ring all-reduce.");
  EXPECT_FALSE(extract_code("").code);
  EXPECT_FALSE(extract_code("inline `code` only").code);
}

TEST(Extract, FenceVariants) {
  // A longer fence may contain a shorter one; tildes work; CRLF line ends are handled.
  ExtractedCode x = extract_code("````cu\nconst char* s = \"```\";\n````\n");
  ASSERT_TRUE(x.code);
  EXPECT_EQ(*x.code, "const char* s = \"```\";\n");
  ExtractedCode t = extract_code("~~~cuda\nint a;\n~~~\n");
  ASSERT_TRUE(t.code);
  EXPECT_EQ(*t.code, "int a;\n");
  ExtractedCode crlf = extract_code("```cu\r\nint b;\r\n```\r\n");
  ASSERT_TRUE(crlf.code);
  EXPECT_EQ(*crlf.code, "int b;\n");
}

TEST(Extract, ACutOffReplyStillYieldsItsUnterminatedBlock) {
  ExtractedCode x = extract_code("Strategy.\n```cu\nint main() {\n  return");
  ASSERT_TRUE(x.code);
  EXPECT_FALSE(x.terminated);
  EXPECT_EQ(*x.code, "int main() {\n  return\n");
  EXPECT_EQ(x.strategy, "Strategy.");
}

TEST(Extract, BlockOffsetsCoverTheFences) {
  std::string text = "a\n```cu\nx\n```\nb\n";
  auto blocks = fenced_blocks(text);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(text.substr(blocks[0].begin, blocks[0].end - blocks[0].begin), "```cu\nx\n```\n");
}

}  // namespace
}  // namespace pkb
