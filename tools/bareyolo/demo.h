// tools/bareyolo/demo.h — `bareyolo demo`: a small convolutional network trained end to end with
// the kernels' ops alone, a 2-second smoke run of the kernels.
#pragma once

namespace bareyolo {

struct DemoOptions {
  int steps = 200;
  int batch = 8;
  int image_size = 32;
  float learning_rate = 0.1f;
  unsigned seed = 0;
};

// Trains the demo network, printing the loss as it goes; returns the final accuracy in [0, 1].
double run_demo(const DemoOptions& options);

}  // namespace bareyolo
