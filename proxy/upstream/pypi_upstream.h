// PypiUpstream: where the proxy gets PyPI project pages (PEP 691 JSON) and files: an HTTPS index such as
// pypi.org, or a local directory mirror for air-gapped use.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "proxy/upstream/http_client.h"

namespace capsule::proxy {

struct UpstreamPage {
  unsigned status = 0;      // 200, 304 (if_none_match matched; body empty) or 404 (no such project)
  std::string body;         // PEP 691 JSON
  std::string etag;         // as the upstream sent it (quoted), or empty
  std::string last_serial;  // X-PyPI-Last-Serial, or empty
  std::string url;          // the page's URL, the base for relative file URLs in it
};

class PypiUpstream {
 public:
  virtual ~PypiUpstream() = default;
  // The project page in PEP 691 JSON, for a PEP 503-normalized name ([a-z0-9-]+, else ProxyError 400
  // bad_project_name). Conditional when if_none_match is set. Statuses other than 200/304/404, and a 200 that is
  // not JSON (an index without PEP 691), throw ProxyError 502 bad_upstream naming the status or content type.
  virtual UpstreamPage project_page(const std::string& normalized_name, const std::string& if_none_match) = 0;
  // The root /simple/ index in PEP 691 JSON.
  virtual UpstreamPage index_page(const std::string& if_none_match) = 0;
  // Streams one file, named by the absolute URL its page gave (resolved against UpstreamPage::url), into
  // `sink`. Throws ProxyError (404 not_found, 502 bad_upstream for other statuses or a URL of the wrong
  // scheme, 502 upstream_unavailable, 504 upstream_timeout).
  virtual void fetch_file(const std::string& url, const BodySink& sink) = 0;
  // "https://pypi.org/simple/" or "mirror /srv/pypi", for logs and records.
  virtual std::string describe() const = 0;
};

// index_url ends with '/': project pages are index_url + name + "/", asked for with
// Accept: application/vnd.pypi.simple.v1+json. File URLs may point to other hosts (files.pythonhosted.org).
std::unique_ptr<PypiUpstream> make_http_pypi_upstream(std::shared_ptr<HttpClient> client,
                                                      std::string index_url = "https://pypi.org/simple/");
// A directory holding simple/index.json (optional), simple/<name>/index.json (PEP 691 JSON) and the files the
// pages reference by relative URL (e.g. "../../files/demo-1.0-py3-none-any.whl"). Page URLs are
// "mirror:/simple/<name>/"; a file URL that resolves outside the directory is refused (404), also through a
// symlink (symlinks staying inside the directory are followed). Page ETags are strong tags made of the file's
// inode, size and mtime. Without simple/index.json the root index lists the simple/<name>/ directories that
// hold an index.json. The directory must exist when the mirror is made (else ProxyError 502).
std::unique_ptr<PypiUpstream> make_local_pypi_mirror(std::filesystem::path root);

}  // namespace capsule::proxy
