// RepositoryPath: segment checks, sidecar suffixes and the Maven layout rules that tell artifact files apart.
#include "proxy/maven/repository_path.h"

#include <array>
#include <cstddef>
#include <vector>

#include "base/ascii.h"

namespace capsule::proxy::maven {
namespace {

constexpr std::string_view kMetadataFile = "maven-metadata.xml";
constexpr std::string_view kSnapshotSuffix = "-SNAPSHOT";
constexpr std::array<std::string_view, 4> kChecksumSuffixes{"md5", "sha1", "sha256", "sha512"};

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Splits on '/' and refuses what cannot name a file inside the repository.
std::optional<std::vector<std::string_view>> split_segments(std::string_view path) {
  if (path.empty()) return std::nullopt;
  for (const char c : path) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || c == '\\') return std::nullopt;
  }
  std::vector<std::string_view> segments;
  for (std::size_t start = 0;;) {
    const std::size_t slash = path.find('/', start);
    const std::string_view segment = path.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (segment.empty() || segment == "." || segment == "..") return std::nullopt;
    segments.push_back(segment);
    if (slash == std::string_view::npos) return segments;
    start = slash + 1;
  }
}

// Removes a trailing ".<checksum>" and then ".asc" from name; returns the sidecar ("asc.sha1", "md5", "").
std::string strip_sidecar(std::string_view& name) {
  std::string checksum;
  for (const std::string_view suffix : kChecksumSuffixes) {
    if (name.size() > suffix.size() + 1 && ends_with(name, suffix) && name[name.size() - suffix.size() - 1] == '.') {
      checksum = suffix;
      name.remove_suffix(suffix.size() + 1);
      break;
    }
  }
  constexpr std::string_view kSignature = ".asc";
  if (name.size() > kSignature.size() && ends_with(name, kSignature)) {
    name.remove_suffix(kSignature.size());
    return checksum.empty() ? "asc" : "asc." + checksum;
  }
  return checksum;
}

std::string dotted(const std::vector<std::string_view>& segments, std::size_t count) {
  std::string group;
  for (std::size_t i = 0; i < count; ++i) {
    if (i != 0) group += '.';
    group += segments[i];
  }
  return group;
}

bool is_separator(std::string_view rest) { return !rest.empty() && (rest.front() == '.' || rest.front() == '-'); }

// "yyyyMMdd.HHmmss-<n>" at the start of text; returns what follows it, or nullopt.
std::optional<std::string_view> skip_build_stamp(std::string_view text) {
  constexpr std::size_t kStampLength = 15;
  if (text.size() < kStampLength + 2) return std::nullopt;
  for (std::size_t i = 0; i < kStampLength; ++i)
    if (i == 8 ? text[i] != '.' : !base::is_ascii_digit(text[i])) return std::nullopt;
  if (text[kStampLength] != '-') return std::nullopt;
  std::size_t end = kStampLength + 1;
  while (end < text.size() && base::is_ascii_digit(text[end])) ++end;
  if (end == kStampLength + 1) return std::nullopt;
  return text.substr(end);
}

// Whether file (sidecar already removed) is one of the files of artifact_id at version.
bool is_artifact_file(std::string_view file, std::string_view artifact_id, std::string_view version) {
  if (file.size() <= artifact_id.size() + 1 || file.substr(0, artifact_id.size()) != artifact_id ||
      file[artifact_id.size()] != '-')
    return false;
  const std::string_view rest = file.substr(artifact_id.size() + 1);
  if (rest.substr(0, version.size()) == version && is_separator(rest.substr(version.size()))) return true;
  if (!ends_with(version, kSnapshotSuffix)) return false;
  // A timestamped build of X-SNAPSHOT: "<artifactId>-X-20230101.120000-3[-classifier].ext".
  const std::string_view base = version.substr(0, version.size() - kSnapshotSuffix.size() + 1);  // "X-"
  if (rest.substr(0, base.size()) != base) return false;
  const auto after = skip_build_stamp(rest.substr(base.size()));
  return after && is_separator(*after);
}

}  // namespace

std::string RepositoryPath::main_path() const {
  return sidecar.empty() ? path : path.substr(0, path.size() - sidecar.size() - 1);
}

std::optional<RepositoryPath> parse_repository_path(std::string_view path) {
  const auto segments = split_segments(path);
  if (!segments) return std::nullopt;
  const std::size_t count = segments->size();

  RepositoryPath result;
  result.path = std::string(path);
  std::string_view file = segments->back();
  result.sidecar = strip_sidecar(file);
  result.file_name = std::string(file);

  if (file == kMetadataFile) {
    result.kind = RepositoryPath::Kind::kMetadata;
    const std::size_t directories = count - 1;
    std::size_t group_segments = directories;
    if (directories >= 3 && ends_with((*segments)[directories - 1], kSnapshotSuffix)) {
      result.version = (*segments)[directories - 1];
      result.artifact_id = (*segments)[directories - 2];
      group_segments = directories - 2;
    } else if (directories >= 2) {
      result.artifact_id = (*segments)[directories - 1];
      group_segments = directories - 1;
    }
    result.group_id = dotted(*segments, group_segments);
    return result;
  }

  if (count >= 4 && is_artifact_file(file, (*segments)[count - 3], (*segments)[count - 2])) {
    result.kind = RepositoryPath::Kind::kArtifact;
    result.group_id = dotted(*segments, count - 3);
    result.artifact_id = (*segments)[count - 3];
    result.version = (*segments)[count - 2];
  }
  return result;
}

}  // namespace capsule::proxy::maven
