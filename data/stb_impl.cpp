// data/stb_impl.cpp — the one translation unit that compiles stb_image and stb_image_write
// (header-only libraries: the implementation must exist exactly once in the program).
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_HDR  // 8-bit images only; keeps float HDR code out of the binary
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image.h>
#include <stb/stb_image_write.h>
