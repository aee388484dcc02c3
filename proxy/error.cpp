// ProxyError: what() reads "step subject: detail".
#include "proxy/error.h"

#include <utility>

namespace capsule::proxy {

ProxyError::ProxyError(unsigned status, std::string code, std::string step, std::string subject, std::string detail)
    : std::runtime_error(step + " " + subject + ": " + detail),
      status_(status),
      code_(std::move(code)),
      step_(std::move(step)),
      subject_(std::move(subject)),
      detail_(std::move(detail)) {}

}  // namespace capsule::proxy
