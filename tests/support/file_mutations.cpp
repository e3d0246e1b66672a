#include "support/file_mutations.h"

#include <hdf5.h>

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace fc::test {
namespace {

void check(herr_t status, const char* what) {
  if (status < 0) throw std::runtime_error(std::string("test mutation failed: ") + what);
}

// Opens a writable copy; closes it at scope end.
struct EditableCopy {
  hid_t file;
  EditableCopy(const std::string& from, const std::string& to) {
    write_bytes(to, read_bytes(from));
    file = H5Fopen(to.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    if (file < 0) throw std::runtime_error("test mutation: cannot open " + to);
  }
  ~EditableCopy() { H5Fclose(file); }
};

herr_t collect(hid_t, const char* name, const H5O_info_t* info, void* out) {
  if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(out)->push_back(std::string("/") + name);
  return 0;
}

}  // namespace

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void truncate_copy(const std::string& from, const std::string& to, std::size_t length) {
  std::vector<std::uint8_t> bytes = read_bytes(from);
  bytes.resize(std::min(length, bytes.size()));
  write_bytes(to, bytes);
}

void flip_copy(const std::string& from, const std::string& to, std::size_t offset) {
  std::vector<std::uint8_t> bytes = read_bytes(from);
  bytes.at(offset) ^= 0xFF;
  write_bytes(to, bytes);
}

std::vector<std::string> hdf5_datasets(const std::string& path) {
  std::vector<std::string> names;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) throw std::runtime_error("test: cannot open " + path);
  const herr_t status = H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, collect, &names);
  H5Fclose(file);
  check(status, "H5Ovisit");
  return names;
}

void delete_object_copy(const std::string& from, const std::string& to, const std::string& object) {
  EditableCopy copy(from, to);
  check(H5Ldelete(copy.file, object.c_str(), H5P_DEFAULT), "H5Ldelete");
}

void replace_dataset_copy(const std::string& from, const std::string& to, const std::string& dataset,
                          const std::vector<unsigned long long>& dims, bool as_float32) {
  EditableCopy copy(from, to);
  check(H5Ldelete(copy.file, dataset.c_str(), H5P_DEFAULT), "H5Ldelete");
  std::vector<hsize_t> d(dims.begin(), dims.end());
  const hid_t space = H5Screate_simple(static_cast<int>(d.size()), d.data(), nullptr);
  const hid_t type = as_float32 ? H5T_IEEE_F32LE : H5T_STD_I32LE;
  const hid_t set = H5Dcreate2(copy.file, dataset.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  std::size_t count = 1;
  for (hsize_t x : d) count *= x;
  std::vector<float> zeros(count, 0.0f);
  const herr_t status = H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
  H5Dclose(set);
  H5Sclose(space);
  check(status, "H5Dwrite");
}

void set_int_attribute_copy(const std::string& from, const std::string& to, const std::string& object,
                            const std::string& name, const std::vector<long long>& values) {
  EditableCopy copy(from, to);
  const hid_t target = H5Oopen(copy.file, object.c_str(), H5P_DEFAULT);
  check(target, "H5Oopen");
  if (H5Aexists(target, name.c_str()) > 0) check(H5Adelete(target, name.c_str()), "H5Adelete");
  const hsize_t n = values.size();
  const hid_t space = values.size() == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
  const hid_t attr = H5Acreate2(target, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  const herr_t status = H5Awrite(attr, H5T_NATIVE_LLONG, values.data());
  H5Aclose(attr);
  H5Sclose(space);
  H5Oclose(target);
  check(status, "H5Awrite");
}

void set_string_attribute_copy(const std::string& from, const std::string& to, const std::string& object,
                               const std::string& name, const std::string& value) {
  EditableCopy copy(from, to);
  const hid_t target = H5Oopen(copy.file, object.c_str(), H5P_DEFAULT);
  check(target, "H5Oopen");
  if (H5Aexists(target, name.c_str()) > 0) check(H5Adelete(target, name.c_str()), "H5Adelete");
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, value.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(target, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  const herr_t status = H5Awrite(attr, type, value.data());
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
  H5Oclose(target);
  check(status, "H5Awrite");
}

}  // namespace fc::test
