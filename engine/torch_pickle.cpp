// engine/torch_pickle.cpp — see torch_pickle.h. The opcodes are those of Python's
// Lib/pickletools.py (documented there byte by byte); each is handled as data only.
#include "engine/torch_pickle.h"

#include <bit>
#include <cstring>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace bareyolo {

const PickleValue* PickleValue::get(const std::string& key) const {
  if (kind != Kind::dict) return nullptr;
  for (const auto& [k, v] : entries)
    if (k->kind == Kind::text && k->text == key) return v;
  return nullptr;
}

namespace {

// What a global the pickle names stands for here.
enum class GlobalRole {
  rebuild_tensor,
  rebuild_parameter,
  storage_type,
  ordered_dict,
  set,
  codecs_encode,
  inert_class
};

// The element type (safetensors name) of torch.<Type>Storage.
const std::map<std::string, std::string>& storage_dtypes() {
  static const std::map<std::string, std::string> dtypes = {
      {"HalfStorage", "F16"},   {"FloatStorage", "F32"}, {"BFloat16Storage", "BF16"},
      {"DoubleStorage", "F64"}, {"LongStorage", "I64"},  {"IntStorage", "I32"},
      {"ByteStorage", "U8"},    {"BoolStorage", "BOOL"}};
  return dtypes;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// A YOLOv5 module ("models.yolo.Detect"), by the repository's names or the pip package's.
bool is_yolov5_module(const std::string& name) {
  const std::string bare = starts_with(name, "yolov5.") ? name.substr(7) : name;
  return starts_with(bare, "models.yolo.") || starts_with(bare, "models.common.");
}

GlobalRole role_of(const std::string& module, const std::string& name, const std::string& source) {
  const std::string full = module + "." + name;
  if (full == "torch._utils._rebuild_tensor_v2") return GlobalRole::rebuild_tensor;
  if (full == "torch._utils._rebuild_parameter" ||
      full == "torch._utils._rebuild_parameter_with_state")
    return GlobalRole::rebuild_parameter;
  if (module == "torch" && storage_dtypes().count(name)) return GlobalRole::storage_type;
  if (full == "collections.OrderedDict") return GlobalRole::ordered_dict;
  if (full == "builtins.set" || full == "__builtin__.set") return GlobalRole::set;
  if (full == "_codecs.encode") return GlobalRole::codecs_encode;
  for (const char* task :
       {"SegmentationModel", "Segment", "Proto", "ClassificationModel", "Classify"})
    if (is_yolov5_module(full) && name == task)
      throw std::invalid_argument(
          source + ": a YOLOv5 " +
          (name == "Classify" || name == "ClassificationModel" ? "classification"
                                                               : "segmentation") +
          " checkpoint (it holds " + full +
          "); bareyolo trains and runs detection models: use a detection checkpoint "
          "(yolov5n.pt ... yolov5x.pt or one trained with train.py)");
  if (starts_with(full, "torch.nn.modules.") || is_yolov5_module(full) || full == "numpy.dtype" ||
      full == "numpy.ndarray" || full == "numpy.core.multiarray.scalar" ||
      full == "numpy.core.multiarray._reconstruct")
    return GlobalRole::inert_class;
  throw std::invalid_argument(
      source + ": refused global '" + full +
      "': bareyolo reads only tensors and YOLOv5 models from a checkpoint and runs none of "
      "its code (PyTorch would call this on load: the file may be hostile)");
}

}  // namespace

// The pickle machine: a stack, marks and a memo, as Python's, over values that only hold data.
class PickleMachine {
 public:
  PickleMachine(TorchPickle& out, const TorchZip& zip)
      : out_(out), zip_(zip), source_(zip.source() + " (" + zip.folder() + "/data.pkl)") {}

  const PickleValue* run(std::span<const uint8_t> pickle) {
    code_ = pickle;
    while (true) {
      const size_t at = pos_;
      const uint8_t op = byte();
      if (op == '.') {  // STOP
        if (stack_.size() != 1 || !marks_.empty()) fail(at, "STOP with a malformed stack");
        return stack_.back();
      }
      step(op, at);
    }
  }

 private:
  using Kind = PickleValue::Kind;

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw std::invalid_argument(source_ + ", byte " + std::to_string(at) + ": " + what +
                                " (not a PyTorch checkpoint, or damaged)");
  }

  // ---- reading the code ----
  std::span<const uint8_t> take(uint64_t n) {
    if (n > code_.size() - pos_) fail(pos_, "the pickle ends early (truncated file?)");
    std::span<const uint8_t> bytes = code_.subspan(pos_, n);
    pos_ += n;
    return bytes;
  }
  uint8_t byte() { return take(1)[0]; }
  template <class T>
  T little() {
    T value;
    std::memcpy(&value, take(sizeof(T)).data(), sizeof(T));
    return value;
  }
  std::string text(uint64_t n) {
    std::span<const uint8_t> bytes = take(n);
    return std::string(bytes.begin(), bytes.end());
  }
  std::string line() {
    std::string result;
    for (uint8_t c; (c = byte()) != '\n';) result += char(c);
    return result;
  }

  // ---- values ----
  PickleValue* make(Kind kind) {
    out_.values_.push_back(std::make_unique<PickleValue>());
    out_.values_.back()->kind = kind;
    return out_.values_.back().get();
  }
  void push(const PickleValue* v) { stack_.push_back(v); }
  const PickleValue* pop(size_t at) {
    if (stack_.size() <= floor()) fail(at, "pops an empty stack");
    const PickleValue* v = stack_.back();
    stack_.pop_back();
    return v;
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // The values above the last mark, which is removed.
  std::vector<const PickleValue*> pop_mark(size_t at) {
    if (marks_.empty()) fail(at, "no MARK to pop to");
    std::vector<const PickleValue*> items(stack_.begin() + marks_.back(), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  // The top of the stack, which the op changes in place (a list, dict or object being built).
  PickleValue* top_mutable(size_t at, Kind kind) {
    if (stack_.size() <= floor()) fail(at, "an empty stack");
    const PickleValue* v = stack_.back();
    if (v->kind != kind) fail(at, "an op that adds to a container finds no container");
    return const_cast<PickleValue*>(v);  // values are built by this machine alone
  }
  void step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80:
        byte();
        return;  // PROTO
      case 0x95:
        little<uint64_t>();
        return;  // FRAME
      case '(':
        marks_.push_back(stack_.size());
        return;
      case '0':
        pop(at);
        return;
      case '1':
        pop_mark(at);
        return;
      case '2': {
        const PickleValue* v = pop(at);
        push(v);
        push(v);
        return;
      }
      case 'N':
        push(make(Kind::none));
        return;
      case 0x88:
      case 0x89: {
        PickleValue* v = make(Kind::boolean);
        v->flag = op == 0x88;
        push(v);
        return;
      }
      case 'J':
        push_integer(little<int32_t>());
        return;
      case 'K':
        push_integer(byte());
        return;
      case 'M':
        push_integer(little<uint16_t>());
        return;
      case 0x8a: {  // LONG1: n bytes of two's complement
        const uint8_t n = byte();
        if (n > 8) fail(at, "an integer of " + std::to_string(n) + " bytes");
        std::span<const uint8_t> bytes = take(n);
        uint64_t value = 0;
        for (size_t i = 0; i < n; ++i) value |= uint64_t(bytes[i]) << (8 * i);
        if (n > 0 && n < 8 && (bytes[n - 1] & 0x80)) value |= ~uint64_t(0) << (8 * n);
        push_integer(int64_t(value));
        return;
      }
      case 'G': {  // BINFLOAT: big-endian double
        uint64_t bits = 0;
        for (uint8_t b : take(8)) bits = bits << 8 | b;
        PickleValue* v = make(Kind::floating);
        v->number = std::bit_cast<double>(bits);
        push(v);
        return;
      }
      case 'X':
        push_text(Kind::text, little<uint32_t>());
        return;
      case 0x8c:
        push_text(Kind::text, byte());
        return;
      case 0x8d:
        push_text(Kind::text, little<uint64_t>());
        return;
      case 'T':
        push_text(Kind::text, little<uint32_t>());
        return;  // BINSTRING (python 2 str)
      case 'U':
        push_text(Kind::text, byte());
        return;
      case 'B':
        push_text(Kind::bytes, little<uint32_t>());
        return;
      case 'C':
        push_text(Kind::bytes, byte());
        return;
      case 0x8e:
        push_text(Kind::bytes, little<uint64_t>());
        return;
      case ']':
        push(make(Kind::list));
        return;
      case ')':
        push(make(Kind::tuple));
        return;
      case '}':
        push(make(Kind::dict));
        return;
      case 0x8f:
        push(make(Kind::list));
        return;  // EMPTY_SET: a list here
      case 'l':
      case 't':
      case 0x91: {  // LIST, TUPLE, FROZENSET
        PickleValue* v = make(op == 't' ? Kind::tuple : Kind::list);
        v->items = pop_mark(at);
        push(v);
        return;
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        PickleValue* v = make(Kind::tuple);
        v->items.resize(op - 0x84);
        for (size_t i = v->items.size(); i-- > 0;) v->items[i] = pop(at);
        push(v);
        return;
      }
      case 'a': {
        const PickleValue* item = pop(at);
        top_mutable(at, Kind::list)->items.push_back(item);
        return;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        std::vector<const PickleValue*> items = pop_mark(at);
        PickleValue* list = top_mutable(at, Kind::list);
        list->items.insert(list->items.end(), items.begin(), items.end());
        return;
      }
      case 'd': {
        PickleValue* v = make(Kind::dict);
        set_items(v, pop_mark(at), at);
        push(v);
        return;
      }
      case 's': {
        const PickleValue* value = pop(at);
        const PickleValue* key = pop(at);
        set_items(top_mutable(at, Kind::dict), {key, value}, at);
        return;
      }
      case 'u': {
        std::vector<const PickleValue*> items = pop_mark(at);
        set_items(top_mutable(at, Kind::dict), items, at);
        return;
      }
      case 'c': {
        const std::string module = line();
        const std::string name = line();
        push_global(module, name);
        return;
      }
      case 0x93: {  // STACK_GLOBAL
        const PickleValue* name = pop(at);
        const PickleValue* module = pop(at);
        if (module->kind != Kind::text || name->kind != Kind::text)
          fail(at, "STACK_GLOBAL without a module and a name");
        push_global(module->text, name->text);
        return;
      }
      case 'R': {
        const PickleValue* args = pop(at);
        const PickleValue* callable = pop(at);
        push(call(callable, args, at));
        return;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args)
        const PickleValue* args = pop(at);
        const PickleValue* cls = pop(at);
        push(call(cls, args, at));
        return;
      }
      case 0x92: {  // NEWOBJ_EX: keyword arguments are ignored (no class here takes any)
        pop(at);
        const PickleValue* args = pop(at);
        const PickleValue* cls = pop(at);
        push(call(cls, args, at));
        return;
      }
      case 'b': {
        const PickleValue* state = pop(at);
        if (stack_.size() <= floor()) fail(at, "BUILD on an empty stack");
        const PickleValue* target = stack_.back();
        // A rebuilt tensor or parameter may carry state (requires_grad, hooks): not needed.
        if (target->kind == Kind::tensor) return;
        top_mutable(at, Kind::object)->state = state;
        return;
      }
      case 'q':
        memo_put(byte(), at);
        return;
      case 'r':
        memo_put(little<uint32_t>(), at);
        return;
      case 0x94:
        memo_put(memo_.size(), at);
        return;  // MEMOIZE
      case 'h':
        push(memo_get(byte(), at));
        return;
      case 'j':
        push(memo_get(little<uint32_t>(), at));
        return;
      case 'Q':
        push(persistent_load(pop(at), at));
        return;
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(at, std::string("opcode ") + hex + " is not one a torch checkpoint's pickle uses");
      }
    }
  }

  void push_integer(int64_t value) {
    PickleValue* v = make(Kind::integer);
    v->integer = value;
    push(v);
  }
  void push_text(Kind kind, uint64_t length) {
    PickleValue* v = make(kind);
    v->text = text(length);
    push(v);
  }
  void set_items(PickleValue* dict, const std::vector<const PickleValue*>& items, size_t at) {
    if (items.size() % 2) fail(at, "a dict item without its value");
    for (size_t i = 0; i < items.size(); i += 2) dict->entries.push_back({items[i], items[i + 1]});
  }
  void push_global(const std::string& module, const std::string& name) {
    role_of(module, name, source_);  // refuses anything off the list, naming it
    PickleValue* v = make(Kind::global);
    v->text = module + "." + name;
    globals_[v] = {module, name};
    push(v);
  }
  void memo_put(uint64_t index, size_t at) {
    if (stack_.size() <= floor()) fail(at, "memoizes an empty stack");
    memo_[index] = stack_.back();
  }
  const PickleValue* memo_get(uint64_t index, size_t at) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail(at, "reads memo " + std::to_string(index) + ", never stored");
    return it->second;
  }

  // ---- the globals' meaning ----
  const PickleValue* call(const PickleValue* callable, const PickleValue* args, size_t at) {
    if (callable->kind != Kind::global || args->kind != Kind::tuple)
      fail(at, "a call of something that is not a known global, or without an argument tuple");
    const auto& [module, name] = globals_.at(callable);
    const std::vector<const PickleValue*>& a = args->items;
    switch (role_of(module, name, source_)) {
      case GlobalRole::rebuild_tensor:
        return rebuild_tensor(a, at);
      case GlobalRole::rebuild_parameter:
        if (a.empty() || a[0]->kind != Kind::tensor) fail(at, "a parameter without its tensor");
        return a[0];
      case GlobalRole::ordered_dict: {
        PickleValue* dict = make(Kind::dict);
        if (!a.empty()) fail(at, "an OrderedDict built from arguments");
        return dict;
      }
      case GlobalRole::set: {
        PickleValue* list = make(Kind::list);
        if (a.size() == 1 && a[0]->kind == Kind::list) list->items = a[0]->items;
        return list;
      }
      case GlobalRole::codecs_encode:
        return latin1_bytes(a, at);
      case GlobalRole::storage_type:
        fail(at, "a storage type called as a function");
      case GlobalRole::inert_class: {
        PickleValue* object = make(Kind::object);
        object->text = callable->text;
        object->items = a;
        return object;
      }
    }
    fail(at, "an unknown call");
  }

  // _codecs.encode(text, 'latin1'): how protocol 2 writes bytes; each character one byte.
  const PickleValue* latin1_bytes(const std::vector<const PickleValue*>& a, size_t at) {
    if (a.size() != 2 || a[0]->kind != Kind::text || a[1]->kind != Kind::text ||
        (a[1]->text != "latin1" && a[1]->text != "latin-1"))
      fail(at, "_codecs.encode other than of a text to latin1");
    PickleValue* v = make(Kind::bytes);
    const std::string& utf8 = a[0]->text;
    for (size_t i = 0; i < utf8.size(); ++i) {
      const uint8_t c = uint8_t(utf8[i]);
      if (c < 0x80) {
        v->text += char(c);
      } else if ((c & 0xe0) == 0xc0 && c <= 0xc3 && i + 1 < utf8.size()) {  // U+0080..U+00FF
        v->text += char(((c & 0x03) << 6) | (uint8_t(utf8[++i]) & 0x3f));
      } else {
        fail(at, "_codecs.encode of a character outside latin1");
      }
    }
    return v;
  }

  // ('storage', torch.HalfStorage, key, location, numel): the zip record data/<key>.
  const PickleValue* persistent_load(const PickleValue* id, size_t at) {
    const auto& t = id->items;
    if (id->kind != Kind::tuple || t.size() != 5 || t[0]->kind != Kind::text ||
        t[0]->text != "storage" || t[1]->kind != Kind::global || t[2]->kind != Kind::text ||
        t[4]->kind != Kind::integer)
      fail(at, "a persistent id other than ('storage', type, key, location, numel)");
    const auto& [module, type] = globals_.at(t[1]);
    if (role_of(module, type, source_) != GlobalRole::storage_type)
      fail(at, "a storage of type " + t[1]->text);
    auto cached = storages_.find(t[2]->text);
    if (cached != storages_.end()) return cached->second;
    PickleValue* storage = make(Kind::storage);
    storage->tensor.name = "data/" + t[2]->text;
    storage->tensor.dtype = storage_dtypes().at(type);
    std::span<const uint8_t> bytes = zip_.entry(storage->tensor.name);
    const int64_t numel = t[4]->integer;
    const size_t item = safetensors_dtype_size(storage->tensor.dtype);
    if (numel < 0 || uint64_t(numel) > bytes.size() / item || bytes.size() != numel * item)
      fail(at, "the storage " + zip_.folder() + "/" + storage->tensor.name + " holds " +
                   std::to_string(bytes.size()) + " bytes, where the pickle says " +
                   std::to_string(numel) + " " + type + " elements of " + std::to_string(item) +
                   " bytes");
    storage->tensor.shape = {numel};
    storage->tensor.bytes.assign(bytes.begin(), bytes.end());
    storages_[t[2]->text] = storage;
    storage_bytes_ += bytes.size();
    return storage;
  }

  std::vector<int64_t> integers(const PickleValue* tuple, size_t at, const char* what) {
    if (tuple->kind != Kind::tuple) fail(at, std::string("a tensor's ") + what + " is no tuple");
    std::vector<int64_t> values;
    for (const PickleValue* v : tuple->items) {
      if (v->kind != Kind::integer || v->integer < 0)
        fail(at, std::string("a tensor's ") + what + " holds a value that is no size");
      values.push_back(v->integer);
    }
    return values;
  }

  // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata]): the
  // elements the view reaches, copied row-major.
  const PickleValue* rebuild_tensor(const std::vector<const PickleValue*>& a, size_t at) {
    if (a.size() < 4 || a[0]->kind != Kind::storage || a[1]->kind != Kind::integer)
      fail(at, "_rebuild_tensor_v2 without (storage, offset, size, stride)");
    const TensorRecord& storage = a[0]->tensor;
    const std::vector<int64_t> shape = integers(a[2], at, "size");
    const std::vector<int64_t> stride = integers(a[3], at, "stride");
    if (shape.size() != stride.size()) fail(at, "a tensor's size and stride differ in length");
    const int64_t storage_numel = storage.shape[0];
    // The view's last element (offset + sum (size-1)*stride) must be in the storage, and the
    // view no larger than it (a broadcast view would copy the storage many times over).
    int64_t last = a[1]->integer, numel = 1;
    bool empty = false;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 0) empty = true;
      if (shape[d] > storage_numel) fail(at, "a tensor larger than its storage " + storage.name);
      numel *= shape[d];
      if (numel > storage_numel) fail(at, "a tensor larger than its storage " + storage.name);
      // (size-1) is below the storage's numel (< 2^40), the stride below 2^63: 128 bits hold it.
      if (shape[d] > 0) {
        const __int128 reach = __int128(shape[d] - 1) * stride[d];
        if (reach >= storage_numel)
          fail(at, "a tensor reaching outside its storage " + storage.name);
        last += int64_t(reach);
      }
    }
    if (a[1]->integer < 0 || (!empty && last >= storage_numel))
      fail(at, "a tensor reaching outside its storage " + storage.name + " of " +
                   std::to_string(storage_numel) + " elements");
    // Each rebuild copies its elements: a pickle rebuilding one storage over and over would
    // copy it without end, where a checkpoint copies each at most twice (model and ema).
    rebuilt_bytes_ += uint64_t(empty ? 0 : numel) * safetensors_dtype_size(storage.dtype);
    if (rebuilt_bytes_ > 2 * storage_bytes_ + (1u << 20))
      fail(at, "tensors that copy their storages many times over");
    PickleValue* v = make(Kind::tensor);
    v->tensor.dtype = storage.dtype;
    v->tensor.shape = shape;
    const size_t item = safetensors_dtype_size(storage.dtype);
    v->tensor.bytes.resize(size_t(empty ? 0 : numel) * item);
    std::vector<int64_t> index(shape.size(), 0);
    for (int64_t i = 0; i < (empty ? 0 : numel); ++i) {
      int64_t element = a[1]->integer;
      for (size_t d = 0; d < shape.size(); ++d) element += index[d] * stride[d];
      std::memcpy(v->tensor.bytes.data() + i * item, storage.bytes.data() + element * item, item);
      for (size_t d = shape.size(); d-- > 0;) {  // the next index, row-major
        if (++index[d] < shape[d]) break;
        index[d] = 0;
      }
    }
    return v;
  }

  TorchPickle& out_;
  const TorchZip& zip_;
  const std::string source_;
  std::span<const uint8_t> code_;
  size_t pos_ = 0;
  std::vector<const PickleValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, const PickleValue*> memo_;
  std::map<const PickleValue*, std::pair<std::string, std::string>> globals_;
  std::map<std::string, const PickleValue*> storages_;
  uint64_t storage_bytes_ = 0, rebuilt_bytes_ = 0;
};

TorchPickle TorchPickle::read(const TorchZip& zip) {
  TorchPickle result;
  PickleMachine machine(result, zip);
  result.root_ = machine.run(zip.entry("data.pkl"));
  return result;
}

}  // namespace bareyolo
