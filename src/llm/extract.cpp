#include "llm/extract.hpp"

#include <algorithm>
#include <cctype>

#include "core/strings.hpp"

namespace pkb {

namespace {

struct Fence {
  char ch = 0;
  size_t len = 0;
  std::string info;
};

/// The fence that `line` opens or closes, if it is one.
std::optional<Fence> fence_of(std::string_view line) {
  size_t indent = 0;
  while (indent < line.size() && indent < 4 && line[indent] == ' ') ++indent;
  if (indent > 3 || indent >= line.size() || (line[indent] != '`' && line[indent] != '~')) return std::nullopt;
  Fence f{line[indent], 0, ""};
  while (indent + f.len < line.size() && line[indent + f.len] == f.ch) ++f.len;
  if (f.len < 3) return std::nullopt;
  f.info = std::string(trim(line.substr(indent + f.len)));
  if (f.ch == '`' && f.info.find('`') != std::string::npos) return std::nullopt;  // inline code, not a fence
  return f;
}

std::string first_word_lower(const std::string& info) {
  std::string w;
  for (char c : info) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '{' || c == ':') break;
    w.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return w;
}

bool is_code_lang(const std::string& lang) {
  static const char* kLangs[] = {"cu", "cuda", "cpp", "c++", "cxx", "cc", "c"};
  return std::any_of(std::begin(kLangs), std::end(kLangs), [&](const char* l) { return lang == l; });
}

}  // namespace

std::vector<FencedBlock> fenced_blocks(std::string_view text) {
  std::vector<FencedBlock> out;
  std::optional<Fence> open;
  FencedBlock cur;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    std::string_view line = text.substr(pos, next - pos);
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto f = fence_of(line);
    if (!open && f) {
      open = f;
      cur = FencedBlock{first_word_lower(f->info), "", pos, 0, true};
    } else if (open && f && f->ch == open->ch && f->len >= open->len && f->info.empty()) {
      cur.end = next;
      out.push_back(std::move(cur));
      open.reset();
    } else if (open) {
      cur.code.append(line).push_back('\n');
    }
    pos = next;
  }
  if (open) {
    cur.end = text.size();
    cur.terminated = false;
    out.push_back(std::move(cur));
  }
  return out;
}

ExtractedCode extract_code(std::string_view reply) {
  auto blocks = fenced_blocks(reply);
  const FencedBlock* best = nullptr;
  for (auto& b : blocks)
    if (is_code_lang(b.lang) && (!best || b.code.size() > best->code.size())) best = &b;
  if (!best)
    for (auto& b : blocks)
      if (b.lang.empty() && b.code.find("pkb_run") != std::string::npos && (!best || b.code.size() > best->code.size()))
        best = &b;
  ExtractedCode out;
  if (!best) {
    out.strategy = std::string(trim(reply));
    return out;
  }
  out.code = best->code;
  out.lang = best->lang;
  out.terminated = best->terminated;
  std::string rest = std::string(reply.substr(0, best->begin)) + std::string(reply.substr(best->end));
  out.strategy = std::string(trim(rest));
  return out;
}

}  // namespace pkb
