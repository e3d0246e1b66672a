#include "harness/plugin/plugin_library.h"

#include <dlfcn.h>

#include "core/error.h"
#include "harness/io/staged_file.h"
#include "harness/plugin/crash_guard.h"

namespace fc {

DType plugin_dtype(std::int32_t dtype) {
  switch (dtype) {
    case FC_DTYPE_F16: return DType::f16;
    case FC_DTYPE_BF16: return DType::bf16;
    case FC_DTYPE_F32: return DType::f32;
  }
  throw Error("unknown dtype " + std::to_string(dtype) + " (FC_DTYPE_F16, FC_DTYPE_BF16 or FC_DTYPE_F32)");
}

std::int32_t plugin_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return FC_DTYPE_F16;
    case DType::bf16: return FC_DTYPE_BF16;
    case DType::f32: return FC_DTYPE_F32;
    default: break;
  }
  throw Error(std::string("no plugin dtype for ") + dtype_name(dtype));
}

PluginLibrary::PluginLibrary(std::string path, std::string origin) : path_(std::move(path)), origin_(std::move(origin)) {
  note_input_file(path_);  // FLASHCORE_PLUGINS too: no output is written over a loaded library
  const std::string where = this->where();
  // Loading runs the library's constructors: plugin code. RTLD_NODELETE: closing the handle
  // leaves the code mapped, so that a CUDA runtime linked into the plugin is never torn down
  // before the process ends, behind the harness's own.
  guarded(who(), "loading", [&] { handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE); });
  if (!handle_) {
    const char* why = dlerror();
    throw Error(where + ": cannot load: " + (why ? why : "dlopen failed"));
  }
  void* entry = dlsym(handle_, FC_PLUGIN_ENTRY_SYMBOL);
  if (!entry) {
    dlclose(handle_);
    throw Error(where + ": no symbol " FC_PLUGIN_ENTRY_SYMBOL ": not a flashcore-check plugin (include/flashcore/plugin.h)");
  }
  const auto get = reinterpret_cast<fc_plugin_entry>(entry);
  guarded(who(), FC_PLUGIN_ENTRY_SYMBOL "()", [&] { plugin_ = get(); });
  try {
    check();
  } catch (...) {
    dlclose(handle_);
    throw;
  }
}

PluginLibrary::~PluginLibrary() {
  if (handle_) dlclose(handle_);
}

void PluginLibrary::check() const {
  const std::string where = this->where();
  if (!plugin_) throw Error(where + ": " FC_PLUGIN_ENTRY_SYMBOL "() returned NULL");
  if (plugin_->abi_version != FC_PLUGIN_ABI_VERSION) {
    throw Error(where + ": built for plugin ABI version " + std::to_string(plugin_->abi_version) +
                ", this flashcore-check speaks version " + std::to_string(FC_PLUGIN_ABI_VERSION) +
                ": rebuild it against this include/flashcore/plugin.h");
  }
  if (plugin_->struct_size < sizeof(fc_plugin)) throw Error(where + ": fc_plugin.struct_size is too small");
  if (plugin_->implementation_count > 0 && !plugin_->implementations) {
    throw Error(where + ": implementation_count is " + std::to_string(plugin_->implementation_count) +
                " but implementations is NULL");
  }
  for (std::uint32_t i = 0; i < plugin_->implementation_count; ++i) {
    const fc_implementation& impl = plugin_->implementations[i];
    const std::string which = where + ": implementation " + std::to_string(i);
    if (impl.struct_size < sizeof(fc_implementation)) throw Error(which + ": struct_size is too small");
    if (!impl.name || !*impl.name) throw Error(which + ": no name");
    const std::string named = where + ": implementation '" + impl.name + "'";
    if (!impl.create || !impl.destroy || !impl.stage_graph || !impl.prepare || !impl.run) {
      throw Error(named + ": create, destroy, stage_graph, prepare and run must all be given");
    }
    if ((impl.features.dtypes & (FC_DTYPE_BIT(FC_DTYPE_F16) | FC_DTYPE_BIT(FC_DTYPE_BF16))) == 0) {
      throw Error(named + ": features.dtypes names neither FC_DTYPE_F16 nor FC_DTYPE_BF16");
    }
    if (impl.features.head_dim_count > 0 && !impl.features.head_dims) {
      throw Error(named + ": features.head_dim_count without head_dims");
    }
    if (impl.fault_count > 0 && !impl.faults) throw Error(named + ": fault_count without faults");
    for (std::uint32_t f = 0; f < impl.fault_count; ++f) {
      const fc_fault& fault = impl.faults[f];
      for (const char* field : {fault.id, fault.bug, fault.shape, fault.mask, fault.dtype, fault.dist,
                                fault.expected_output, fault.expected_cause}) {
        if (!field || !*field) {
          throw Error(named + ": fault " + std::to_string(f) + ": id, bug, shape, mask, dtype, dist, " +
                      "expected_output and expected_cause must all be given");
        }
      }
    }
  }
}

}  // namespace fc
