// ProxyError: a package-proxy failure, a base::Error whose cause names the step ("cutoff", "upstream",
// "maven-metadata", ...) and the URL, path or name involved (cause().path). Its code alone gives the HTTP status
// the proxy answers with, through http::status_for (400 bad input, 404 masked or missing, 502 bad upstream, ...).
#pragma once

#include <string>
#include <utility>

#include "base/error.h"

namespace capsule::proxy {

class ProxyError : public base::Error {
 public:
  // code: a stable token for the error body ("bad_cutoff", "upstream_unavailable", ...); step: what was being
  // done; subject: the URL, path or name involved; detail: what went wrong. what() reads "step subject: detail".
  ProxyError(std::string code, std::string step, std::string subject, std::string detail)
      : base::Error(base::Cause{std::move(step), std::move(subject), 0, std::move(detail)}, std::move(code)) {}
  // A lower layer's failure (a file helper's, say) given the code the proxy answers with; its cause, which
  // already names the step and path, is kept as it is.
  ProxyError(std::string code, base::Cause cause) : base::Error(std::move(cause), std::move(code)) {}
};

}  // namespace capsule::proxy
