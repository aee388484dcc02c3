// Real host users and groups for the authorization tests (useradd/groupadd, removed again), and API calls
// made as one of them: a forked child takes on the user's ids before it connects to capsuled's socket.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace capsule::testing {

struct TestUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary, as the child sets them
};

// `base` made unique to this test process (pid and a random token; at most base + 12 characters, and
// account names stop at 32): ctest runs test processes side by side, each with its own accounts.
std::string account_name(const std::string& base);
// Creates the group `name` (removing a stale one left by an aborted run first); its gid.
gid_t create_group(const std::string& name);
// Creates a user without a home, primary group `primary`, supplementary `extra` (names).
TestUser create_user(const std::string& name, const std::string& primary, const std::vector<std::string>& extra);
// userdel / groupdel; never throws (used in teardown), a failure is printed.
void remove_user(const std::string& name);
void remove_group(const std::string& name);

// What a call made as a user got: an HTTP answer, or the errno of a failed connect.
struct UserCall {
  int connect_errno = 0;
  int status = 0;
  std::string body;
  std::string failure;  // the child could not take on the ids, or the client threw something else

  nlohmann::json json() const;
};

// One request to `socket_path` from a child process running as `user` (setgroups, setgid, setuid first).
UserCall call_as(const TestUser& user, const std::string& socket_path, const std::string& method,
                 const std::string& target, const nlohmann::json& body = nullptr);

}  // namespace capsule::testing
