// ProxyError: a package-proxy failure that carries its cause (step, subject, detail) and the HTTP status the
// proxy answers with (400 bad input, 404 masked or missing, 502 bad upstream, 503 offline miss, 504 timeout).
#pragma once

#include <stdexcept>
#include <string>

namespace capsule::proxy {

class ProxyError : public std::runtime_error {
 public:
  // step: what was being done ("cutoff", "upstream", "metadata", ...); subject: the URL, path or name involved;
  // code: a stable machine-readable token for the error body ("bad_cutoff", "upstream_unavailable", ...).
  ProxyError(unsigned status, std::string code, std::string step, std::string subject, std::string detail);

  unsigned status() const { return status_; }
  const std::string& code() const { return code_; }
  const std::string& step() const { return step_; }
  const std::string& subject() const { return subject_; }
  const std::string& detail() const { return detail_; }

 private:
  unsigned status_;
  std::string code_;
  std::string step_;
  std::string subject_;
  std::string detail_;
};

}  // namespace capsule::proxy
