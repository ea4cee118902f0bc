// engine/torch_pickle.h — the pickle of a PyTorch checkpoint, read by a restricted unpickler that
// executes nothing.
//
// Python's unpickler calls whatever a pickle names (a __reduce__ naming os.system runs a shell
// command): loading an untrusted .pt with PyTorch runs its author's code. This reader runs a
// small pickle machine over values only. It knows the opcodes pickle protocols 2 to 5 write
// for plain data, and a fixed list of globals a torch checkpoint names:
//   - torch._utils._rebuild_tensor_v2 / _rebuild_parameter(_with_state): a tensor, cut from a
//     storage (the persistent id ('storage', torch.HalfStorage, key, location, numel) names the
//     zip record data/<key>);
//   - torch.<Type>Storage: the element type of a storage (Half, Float, BFloat16, Double, Long,
//     Int, Byte, Bool);
//   - collections.OrderedDict and builtins.set (a list here), _codecs.encode (latin-1 bytes);
//   - classes whose objects are only data here, never called: torch.nn.modules.*, YOLOv5's
//     models.yolo.* and models.common.* (also under the pip package's yolov5.), and numpy's
//     dtype, scalar, ndarray and _reconstruct (a numpy fitness value in a training
//     checkpoint). Such a "call" makes an object value holding the class name and arguments,
//     and BUILD gives it its state (a module's __dict__: _parameters, _buffers, _modules, ...).
// Any other global is refused when the pickle names it, before anything is built, with the
// global's name in the message. So is any other opcode, a truncated pickle, a storage record
// whose size is not what the pickle says, and a tensor that reaches outside its storage.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/safetensors.h"
#include "engine/torch_zip.h"

namespace bareyolo {

struct PickleValue {
  enum class Kind {
    none,
    boolean,
    integer,
    floating,
    text,
    bytes,
    list,
    tuple,
    dict,
    object,
    global,
    storage,
    tensor
  };
  Kind kind = Kind::none;
  bool flag = false;
  int64_t integer = 0;
  double number = 0;
  std::string text;  // text, bytes; a global's "module.name"; an object's class
  std::vector<const PickleValue*> items;  // list, tuple (and set); an object's arguments
  std::vector<std::pair<const PickleValue*, const PickleValue*>> entries;  // dict, in order
  const PickleValue* state = nullptr;  // an object's BUILD state (a dict for a module)
  TensorRecord tensor;                 // a tensor: dtype, shape, row-major bytes; a storage's
                                       // dtype and bytes (shape = {numel})

  // The value of the dict entry whose key is the text `key`, or nullptr (also for a non-dict).
  const PickleValue* get(const std::string& key) const;
  bool is_none() const { return kind == Kind::none; }
};

// The unpickled data.pkl of a checkpoint. Values are owned here and point at one another (a
// pickle may share a value or even contain itself), so walk them with a depth limit.
class TorchPickle {
 public:
  // Reads `zip`'s data.pkl; storages come from its data/<key> records.
  static TorchPickle read(const TorchZip& zip);
  const PickleValue& root() const { return *root_; }

 private:
  friend class PickleMachine;
  std::vector<std::unique_ptr<PickleValue>> values_;
  const PickleValue* root_ = nullptr;
};

}  // namespace bareyolo
