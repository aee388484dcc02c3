// named_artifacts: a word scan, not a shell parser. It only decides what a failed command is called
// (missing_artifact or container_exit), so a word it misreads costs a label, never a run.
#include "daemon/stacks/named_artifacts.h"

#include <algorithm>
#include <string_view>

namespace capsule::daemon {
namespace {

constexpr std::size_t kMaxArtifacts = 32;

bool is_archive(const std::string& word) {
  return word.ends_with(".jar") || word.ends_with(".war") || word.ends_with(".ear");
}

void add_artifact(std::vector<std::string>& out, const std::string& word) {
  if (word.empty() || out.size() >= kMaxArtifacts) return;
  if (std::find(out.begin(), out.end(), word) == out.end()) out.push_back(word);
}

// Archive words of one argument; a classpath "a.jar:lib/b.jar" is read as its parts.
void add_archives(std::vector<std::string>& out, const std::string& word) {
  std::size_t start = 0;
  for (;;) {
    const std::size_t colon = word.find(':', start);
    const std::string part = word.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (is_archive(part) && part.find('*') == std::string::npos) add_artifact(out, part);
    if (colon == std::string::npos) return;
    start = colon + 1;
  }
}

std::vector<std::string> script_words(const std::string& script) {
  std::vector<std::string> words;
  std::string word;
  for (char c : script) {
    if (std::string_view(" \t\n;&|()<>'\"`=").find(c) != std::string_view::npos) {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

}  // namespace

std::vector<std::string> named_artifacts(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  if (argv.empty()) return out;
  const bool shell = argv.size() == 3 && (argv[0] == "/bin/sh" || argv[0] == "sh" || argv[0] == "/bin/bash" ||
                                          argv[0] == "bash") && argv[1] == "-c";
  if (!shell && argv[0].find('/') != std::string::npos) add_artifact(out, argv[0]);
  const std::vector<std::string> words = shell ? script_words(argv[2]) : argv;
  if (shell && !words.empty() && words[0].find('/') != std::string::npos) add_artifact(out, words[0]);
  for (std::size_t i = shell ? 0 : 1; i < words.size(); ++i) add_archives(out, words[i]);
  return out;
}

}  // namespace capsule::daemon
