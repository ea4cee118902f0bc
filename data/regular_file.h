// data/regular_file.h — reading a dataset file whole, without ever blocking on one that is not
// a regular file: a FIFO named like a label or an image would block open() forever, and a
// device could stream without end. The file is opened non-blocking and read only when fstat
// says it is a regular file.
#pragma once

#include <string>

namespace bareyolo::data {

struct FileContents {
  // missing: no such file. A symbolic link that leads nowhere (or into a loop) is unreadable,
  // with the link's target in `error`: the file is there, broken.
  enum Kind { regular, missing, directory, not_regular, unreadable } kind = missing;
  std::string bytes;  // the whole file, when kind == regular
  std::string error;  // what went wrong otherwise, in words (strerror, or the file's type)
};

FileContents read_regular_file(const std::string& path);

}  // namespace bareyolo::data
