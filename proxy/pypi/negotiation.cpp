// PEP 691 negotiation: a tolerant Accept parser (quote-aware, thousandths for q) and offer ranking.
#include "proxy/pypi/negotiation.h"

#include <array>
#include <tuple>
#include <utility>
#include <vector>

#include "base/ascii.h"

namespace capsule::proxy::pypi {
namespace {

struct Offer {
  std::string_view type;   // what Accept names it by
  std::string_view alias;  // the PEP 691 "latest" spelling, or empty
  Format format;
  std::string_view content_type;
  int named_rank;     // server preference when the client named the type (higher wins)
  int wildcard_rank;  // server preference when only a wildcard matched
};

constexpr std::array<Offer, 3> kOffers{{
    {kJsonType, "application/vnd.pypi.simple.latest+json", Format::kJson, kJsonType, 3, 1},
    {kHtmlType, "application/vnd.pypi.simple.latest+html", Format::kHtml, kHtmlType, 2, 2},
    {"text/html", "", Format::kHtml, "text/html; charset=utf-8", 1, 3},
}};

struct Range {
  std::string type;     // lowercased, e.g. "text"
  std::string subtype;  // lowercased, e.g. "html" or "*"
  int q = 1000;         // thousandths
};

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

// RFC 9110 token characters.
bool is_token(std::string_view text) {
  if (text.empty()) return false;
  for (const char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

// Splits at `delimiter` outside double-quoted strings (a parameter value may hold ',' or ';').
std::vector<std::string_view> split_unquoted(std::string_view text, char delimiter) {
  std::vector<std::string_view> parts;
  bool quoted = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (quoted && text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      quoted = !quoted;
    } else if (!quoted && text[i] == delimiter) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.push_back(text.substr(start));
  return parts;
}

// qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths.
std::optional<int> parse_qvalue(std::string_view text) {
  if (text.empty() || (text[0] != '0' && text[0] != '1')) return std::nullopt;
  int value = (text[0] - '0') * 1000;
  if (text.size() == 1) return value;
  if (text[1] != '.' || text.size() > 5) return std::nullopt;
  int scale = 100;
  for (std::size_t i = 2; i < text.size(); ++i, scale /= 10) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    value += (text[i] - '0') * scale;
  }
  if (value > 1000) return std::nullopt;
  return value;
}

std::optional<Range> parse_range(std::string_view entry) {
  const auto pieces = split_unquoted(entry, ';');
  const std::string_view media = trim(pieces[0]);
  const std::size_t slash = media.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  Range range{base::ascii_lowercase(media.substr(0, slash)), base::ascii_lowercase(media.substr(slash + 1))};
  if (!is_token(range.type) || !is_token(range.subtype)) return std::nullopt;
  if (range.type == "*" && range.subtype != "*") return std::nullopt;
  for (std::size_t i = 1; i < pieces.size(); ++i) {
    const std::string_view parameter = trim(pieces[i]);
    const std::size_t equals = parameter.find('=');
    if (equals == std::string_view::npos || !is_token(trim(parameter.substr(0, equals)))) return std::nullopt;
    if (base::ascii_lowercase(trim(parameter.substr(0, equals))) != "q") continue;  // media type parameters don't matter here
    const auto q = parse_qvalue(trim(parameter.substr(equals + 1)));
    if (!q) return std::nullopt;
    range.q = *q;
    break;  // what follows q are accept-ext parameters
  }
  return range;
}

// 3 for the type itself (or its alias), 2 for type/*, 1 for */*, 0 for no match.
int specificity(const Range& range, const Offer& offer) {
  if (range.type == "*") return 1;
  const std::string_view offer_type = offer.type.substr(0, offer.type.find('/'));
  if (range.type != offer_type) return 0;
  if (range.subtype == "*") return 2;
  const std::string full = range.type + "/" + range.subtype;
  return full == offer.type || (!offer.alias.empty() && full == offer.alias) ? 3 : 0;
}

Negotiated answer(const Offer& offer) { return {offer.format, std::string(offer.content_type)}; }

std::optional<Negotiated> from_format_query(std::string_view format_query) {
  std::string wanted = base::ascii_lowercase(trim(format_query));
  for (char& c : wanted)
    if (c == ' ') c = '+';
  for (const auto& offer : kOffers)
    if (wanted == offer.type || (!offer.alias.empty() && wanted == offer.alias)) return answer(offer);
  return std::nullopt;
}

}  // namespace

std::optional<Negotiated> negotiate(std::string_view accept, std::string_view format_query) {
  if (auto chosen = from_format_query(format_query)) return chosen;

  std::vector<Range> ranges;
  for (const auto entry : split_unquoted(accept, ','))
    if (auto range = parse_range(entry)) ranges.push_back(std::move(*range));
  if (ranges.empty()) ranges.push_back({"*", "*"});

  const Offer* best = nullptr;
  std::tuple<int, int, int> best_key{0, 0, 0};  // (q, specificity, server preference)
  for (const auto& offer : kOffers) {
    int q = 0, level = 0;
    for (const auto& range : ranges) {
      const int s = specificity(range, offer);
      if (s > level || (s == level && s != 0 && range.q > q)) {
        level = s;
        q = range.q;
      }
    }
    if (q == 0) continue;
    const std::tuple<int, int, int> key{q, level, level == 3 ? offer.named_rank : offer.wildcard_rank};
    if (key > best_key) {
      best_key = key;
      best = &offer;
    }
  }
  if (!best) return std::nullopt;
  return answer(*best);
}

}  // namespace capsule::proxy::pypi
