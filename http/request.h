// One HTTP request as a handler sees it: method, raw and decoded target, headers, body, route parameters and
// the peer's kernel-reported credentials. Plain data, filled by the request parser and read by handlers.
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace capsule::http {

// Orders header names as HTTP compares them (ASCII case-insensitively).
struct CaseInsensitiveLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
      return std::tolower(static_cast<unsigned char>(x)) < std::tolower(static_cast<unsigned char>(y));
    });
  }
};

// The connecting process as the kernel saw it at connect time (SO_PEERCRED, and SO_PEERGROUPS for its
// supplementary groups); `known` is false on TCP connections.
struct PeerCredentials {
  bool known = false;
  pid_t pid = 0;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::vector<gid_t> groups;
};

struct Request {
  std::string method;  // as sent, case-sensitive ("GET")
  std::string target;  // raw request target ("/v1/runs?state=running")
  std::string path;    // percent-decoded path ("/v1/runs")
  std::map<std::string, std::string> query;  // decoded ('+' is a space); a repeated key keeps the last value
  std::map<std::string, std::string, CaseInsensitiveLess> headers;  // repeated fields joined with ", "
  std::string body;
  PeerCredentials peer;
  std::map<std::string, std::string> params;  // from the route pattern's {name} segments, decoded
};

}  // namespace capsule::http
