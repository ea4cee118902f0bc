// docs/examples/predict/predict_api.cpp — detection through the C++ API, built against an
// installed bareyolo (docs/build.md: `cmake --install`, then this folder's CMakeLists.txt).
//
//   predict_api MODEL IMAGE [CONF]
//
// MODEL is a model yaml (fresh weights) or a .safetensors that bareyolo wrote; prints one line
// per detection: class, score, and the box's corners in the image's pixels.
#include <cstdio>
#include <string>

#include "models/api/model.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: predict_api MODEL IMAGE [CONF]\n");
    return 2;
  }
  try {
    bareyolo::Model model(argv[1]);
    bareyolo::PredictOptions options;
    if (argc > 3) options.conf = std::stof(argv[3]);
    for (const bareyolo::models::Detection& d : model.predict(argv[2], options)) {
      const int c = d.class_id;
      const std::string name =
          c < int(model.names().size()) ? model.names()[size_t(c)] : std::to_string(c);
      std::printf("%s %.4f %.2f %.2f %.2f %.2f\n", name.c_str(), d.conf, d.box.x1, d.box.y1,
                  d.box.x2, d.box.y2);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "error: %s\n", error.what());
    return 1;
  }
  return 0;
}
