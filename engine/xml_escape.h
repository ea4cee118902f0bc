// engine/xml_escape.h — text made safe inside XML, SVG or HTML: as character data or as a quoted
// attribute value (the run report's and trace-summary's drawings put names from the model and
// the trace there).
#pragma once

#include <string>
#include <string_view>

namespace bareyolo {

inline std::string xml_escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace bareyolo
